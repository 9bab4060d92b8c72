#pragma once
// Hardware the planner knows: accelerators (memory, peak dense FLOP/s) and
// links (bandwidth per direction, small-message latency). The figures and
// their sources are listed in docs/planner.md; `meshtrain plan --measure`
// adds a profile measured on this machine.
#include <string>
#include <string_view>
#include <vector>

namespace meshtrain::plan {

struct DeviceProfile {
  std::string name;
  double memory_bytes = 0;        // usable capacity as sold (GB = 1e9 bytes)
  double peak_flops_16bit = 0;    // dense BF16/FP16 tensor-core FLOP/s
  double peak_flops_fp32 = 0;     // dense FP32 FLOP/s (no TF32)
  std::string intra_link;         // the link between devices of one node, by default
  std::string inter_link;         // the network between nodes, by default
  int devices_per_node = 8;       // as the machine families ship it
};

struct LinkProfile {
  std::string name;
  // Per device and per direction, bytes/s. For a network between nodes the
  // node's whole bandwidth: each device gets bandwidth / devices_per_node.
  double bandwidth_Bps = 0;
  double latency_s = 0;  // one small message, end to end
  bool per_node = false;  // bandwidth is the node's, shared by its devices
};

const std::vector<DeviceProfile>& device_profiles();
const std::vector<LinkProfile>& link_profiles();

// Looks a profile up by name (case-insensitive); throws ConfigError naming
// the known ones.
const DeviceProfile& find_device(std::string_view name);
const LinkProfile& find_link(std::string_view name);

// The links a forecast assumes for workers on GPUs it cannot measure
// between (plan --config): those of the GPU's family, by the name the
// CUDA runtime gives ("NVIDIA H100 80GB HBM3": NVLink 4 inside a node),
// PCIe for a PCIe card of a known family, and PCIe 4 with the network of
// the "custom" device for anything else; `source` says which.
struct AssumedLinks {
  const LinkProfile* intra = nullptr;  // between the GPUs of one host
  const LinkProfile* inter = nullptr;  // between hosts, unless the job names one
  std::string source;                  // "the NVIDIA H100 80GB HBM3's family (h100)"
};
AssumedLinks links_of_gpu(std::string_view gpu_name);

}  // namespace meshtrain::plan
