#pragma once
// The device collectives a strategy's group gets for tensors of `store`
// (comm/device/): the host's collectives, staged through host memory off
// the CPU. The one place that will choose NCCL where each rank has a GPU
// of its own.
#include <memory>

#include "meshtrain/comm/device/host_staged_collectives.hpp"
#include "meshtrain/core/param_store.hpp"

namespace meshtrain::parallel {

inline std::unique_ptr<comm::DeviceCollectives> device_collectives_for(
    comm::ProcessGroup& group, const ParamStore& store,
    comm::AllReduceAlgorithm algorithm = comm::AllReduceAlgorithm::Auto) {
  return std::make_unique<comm::HostStagedCollectives>(group, store.device_memory(), algorithm);
}

}  // namespace meshtrain::parallel
