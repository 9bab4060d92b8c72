#pragma once
// Which engine carries a job's device collectives, decided the same way on
// every worker from what each one saw of its own GPU (gathered over the
// host group first): NCCL needs every worker on a GPU of its own (NCCL
// refuses two ranks of one communicator on one GPU) and libnccl.so.2 where
// each one runs; anything else is served by the host-staged path, which
// runs everywhere. No CUDA here: the facts arrive as numbers.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "meshtrain/comm/device/device_collectives_kind.hpp"

namespace meshtrain::comm {

// What one worker saw: whether libnccl.so.2 loaded there, and its GPU's
// UUID (cudaDeviceProp::uuid, unique across machines).
struct WorkerGpu {
  bool nccl_loads = false;
  std::array<unsigned char, 16> uuid{};
};

// A WorkerGpu as three int64s for an all-gather over the host's collectives, and back.
inline constexpr size_t kWorkerGpuWords = 3;
std::array<int64_t, kWorkerGpuWords> encode(const WorkerGpu& gpu);
WorkerGpu decode_worker_gpu(std::span<const int64_t, kWorkerGpuWords> words);

struct DeviceCollectivesChoice {
  bool nccl = false;
  std::string why;  // for the job's log: "every one of the 4 workers has a GPU of its own"
};

// The choice for `kind` given every worker's WorkerGpu in worker-rank order
// (on a GPU). Throws ConfigError for kind == Nccl where NCCL cannot serve,
// naming the workers and the reason, and saying what to change.
DeviceCollectivesChoice choose_device_collectives(DeviceCollectivesKind kind, std::span<const WorkerGpu> workers);

}  // namespace meshtrain::comm
