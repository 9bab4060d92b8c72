#include "meshtrain/parallel/device_collectives.hpp"

#include <string>
#include <vector>

#include "meshtrain/comm/device/host_staged_collectives.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/kernels/device_probe.hpp"
#ifdef MESHTRAIN_HAVE_NCCL
#include "meshtrain/comm/nccl/nccl_groups.hpp"
#include "meshtrain/comm/nccl/nccl_library.hpp"
#include "meshtrain/kernels/cuda/cuda_memory.hpp"
#endif

namespace meshtrain::parallel {
namespace {

// What this worker sees of its GPU; `nccl_problem` says why NCCL does not load here.
comm::WorkerGpu this_worker_gpu(const Device& device, std::string& nccl_problem) {
  comm::WorkerGpu gpu;
  gpu.uuid = kernels::open_cuda_device(device).uuid;
#ifdef MESHTRAIN_HAVE_NCCL
  try {
    comm::nccl::nccl_library();
    gpu.nccl_loads = true;
  } catch (const CommError& e) {
    nccl_problem = e.what();
  }
#else
  nccl_problem = "this meshtrain was built without NCCL (nccl.h was not found when it was configured)";
#endif
  return gpu;
}

std::vector<comm::WorkerGpu> every_worker_gpu(comm::ProcessGroup& all, const comm::WorkerGpu& mine) {
  const auto words = comm::encode(mine);
  std::vector<int64_t> gathered(words.size() * size_t(all.size()));
  all.all_gather(std::span<const int64_t>(words), std::span<int64_t>(gathered));
  std::vector<comm::WorkerGpu> gpus;
  for (size_t r = 0; r < size_t(all.size()); ++r)
    gpus.push_back(comm::decode_worker_gpu(
        std::span<const int64_t, comm::kWorkerGpuWords>(gathered.data() + r * comm::kWorkerGpuWords,
                                                        comm::kWorkerGpuWords)));
  return gpus;
}

}  // namespace

std::unique_ptr<comm::DeviceCollectives> device_collectives_for(comm::ProcessGroup& group, const ParamStore& store,
                                                                comm::AllReduceAlgorithm algorithm) {
  return device_collectives_for(group, store.device_memory(), algorithm);
}

std::unique_ptr<comm::DeviceCollectives> device_collectives_for(comm::ProcessGroup& group, DeviceAllocator* memory,
                                                                comm::AllReduceAlgorithm algorithm) {
  if (group.device_engine() && algorithm != comm::AllReduceAlgorithm::ReductionServer)
    return group.device_engine()->collectives();
  return std::make_unique<comm::HostStagedCollectives>(group, memory, algorithm);
}

comm::DeviceCollectivesChoice use_device_collectives(comm::MeshGroups& groups, comm::DeviceCollectivesKind kind,
                                                     const Device& device, double timeout_s) {
  if (device.kind != DeviceKind::Cuda) {
    if (kind == comm::DeviceCollectivesKind::Nccl)
      throw ConfigError("parallel.device_collectives = \"nccl\" needs workers on GPUs (training.device = \"cuda\")");
    return {.nccl = false, .why = "the workers are not on GPUs"};
  }
  std::string nccl_problem;
  const comm::WorkerGpu mine = this_worker_gpu(device, nccl_problem);
  comm::DeviceCollectivesChoice choice;
  try {
    choice = comm::choose_device_collectives(kind, every_worker_gpu(*groups.all, mine));
  } catch (const ConfigError& e) {
    throw ConfigError(nccl_problem.empty() ? e.what() : std::string(e.what()) + " (here: " + nccl_problem + ")");
  }
#ifdef MESHTRAIN_HAVE_NCCL
  if (choice.nccl) {
    auto* memory = dynamic_cast<kernels::cuda::CudaAllocator*>(&kernels::backend_for(device).allocator());
    if (!memory) throw DeviceError("the GPU's backend has no CUDA stream for NCCL to follow");
    comm::nccl::use_nccl(groups, memory->stream(), timeout_s);
    choice.why += "; NCCL " + comm::nccl::nccl_version();
  }
#else
  (void)timeout_s;
#endif
  return choice;
}

}  // namespace meshtrain::parallel
