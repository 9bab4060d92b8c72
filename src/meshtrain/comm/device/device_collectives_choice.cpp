#include "meshtrain/comm/device/device_collectives_choice.hpp"

#include <cstring>
#include <map>

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {
namespace {

// Why NCCL cannot serve these workers; empty when it can.
std::string why_not_nccl(std::span<const WorkerGpu> workers) {
  std::vector<int> without;
  for (size_t r = 0; r < workers.size(); ++r)
    if (!workers[r].nccl_loads) without.push_back(int(r));
  if (!without.empty()) {
    std::string ranks;
    for (int r : without) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    return "libnccl.so.2 does not load on worker" + std::string(without.size() > 1 ? "s " : " ") + ranks;
  }
  std::map<std::array<unsigned char, 16>, int> first_on;
  for (size_t r = 0; r < workers.size(); ++r) {
    const auto [it, fresh] = first_on.emplace(workers[r].uuid, int(r));
    if (!fresh)
      return "workers " + std::to_string(it->second) + " and " + std::to_string(r) +
             " share one GPU, and NCCL refuses two ranks of a communicator on one GPU";
  }
  return {};
}

}  // namespace

std::array<int64_t, kWorkerGpuWords> encode(const WorkerGpu& gpu) {
  std::array<int64_t, kWorkerGpuWords> words{gpu.nccl_loads ? 1 : 0, 0, 0};
  std::memcpy(&words[1], gpu.uuid.data(), gpu.uuid.size());
  return words;
}

WorkerGpu decode_worker_gpu(std::span<const int64_t, kWorkerGpuWords> words) {
  WorkerGpu gpu;
  gpu.nccl_loads = words[0] != 0;
  std::memcpy(gpu.uuid.data(), &words[1], gpu.uuid.size());
  return gpu;
}

DeviceCollectivesChoice choose_device_collectives(DeviceCollectivesKind kind, std::span<const WorkerGpu> workers) {
  if (kind == DeviceCollectivesKind::HostStaged)
    return {.nccl = false, .why = "parallel.device_collectives = \"host_staged\""};
  const std::string why_not = why_not_nccl(workers);
  if (why_not.empty())
    return {.nccl = true,
            .why = "every one of the " + std::to_string(workers.size()) + " workers has a GPU of its own"};
  if (kind == DeviceCollectivesKind::Nccl)
    throw ConfigError("parallel.device_collectives = \"nccl\" cannot serve this job: " + why_not +
                      ". Give each worker a GPU of its own (training.device = \"cuda\" takes the launcher's "
                      "LOCAL_RANK) with NCCL installed, or set parallel.device_collectives = \"auto\" or "
                      "\"host_staged\"");
  return {.nccl = false, .why = why_not};
}

}  // namespace meshtrain::comm
