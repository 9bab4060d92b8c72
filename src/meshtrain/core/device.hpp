#pragma once
// The device a job's tensors and kernels live on (training.device):
//   "cpu"      the host's cores (every layer's CPU kernels)
//   "cuda"     a GPU; under a launcher the one numbered LOCAL_RANK, else 0
//   "cuda:N"   GPU N of this host, whatever the launcher says
//   "cpu-guarded"  the CPU's kernels on memory the host cannot touch outside
//              them (kernels/guarded_backend.hpp): a GPU's memory rules on
//              a machine without one, so a host access to device memory
//              crashes here instead of on the first GPU it meets
// Parsing names no library: whether a GPU is usable is asked of the CUDA
// runtime (kernels/device_probe.hpp).
#include <string>
#include <string_view>

namespace meshtrain {

enum class DeviceKind { Cpu, Cuda, GuardedCpu };

struct Device {
  DeviceKind kind = DeviceKind::Cpu;
  int index = 0;  // which GPU of this host (Cuda)
  bool is_cpu() const { return kind == DeviceKind::Cpu; }
  bool operator==(const Device&) const = default;
};

// What a training.device value asks for, before a launcher's local rank is
// known: `index_given` tells "cuda:N" (N fixed) from "cuda" (local rank).
struct DeviceRequest {
  DeviceKind kind = DeviceKind::Cpu;
  int index = 0;
  bool index_given = false;
};

// Parses "cpu", "cuda", "cuda:N" (N in [0, 1023]) or "cpu-guarded"; throws ConfigError
// naming the value and the accepted forms otherwise.
DeviceRequest parse_device(std::string_view text);

// The device this process uses: "cuda" takes local_rank (a launcher's
// LOCAL_RANK, 0 without one), "cuda:N" takes N.
Device resolve_device(const DeviceRequest& request, int local_rank);

// "cpu", "cuda:0", "cpu-guarded"
std::string device_name(const Device& device);

}  // namespace meshtrain
