#pragma once
// The device collectives of a job's groups (comm/device/): what carries
// them is decided once, when the workers connect (use_device_collectives:
// NCCL where every worker has a GPU of its own and libnccl.so.2 loads,
// else the host-staged path), and each strategy then asks here for its
// group's: the group's NCCL communicator where it has one, else the host's
// collectives staged through host memory off the CPU (on the CPU, the host's
// collectives on the values themselves).
#include <memory>

#include "meshtrain/comm/device/device_collectives.hpp"
#include "meshtrain/comm/device/device_collectives_choice.hpp"
#include "meshtrain/comm/mesh/mesh_groups.hpp"
#include "meshtrain/core/device.hpp"
#include "meshtrain/core/param_store.hpp"

namespace meshtrain::parallel {

// For tensors of `store` over `group`. The Reduction Server's reducers are
// host processes: a group that uses them (algorithm ReductionServer) is
// always staged through the host.
std::unique_ptr<comm::DeviceCollectives> device_collectives_for(
    comm::ProcessGroup& group, const ParamStore& store,
    comm::AllReduceAlgorithm algorithm = comm::AllReduceAlgorithm::Auto);
// The same for tensors in `memory` (null: the host's).
std::unique_ptr<comm::DeviceCollectives> device_collectives_for(
    comm::ProcessGroup& group, DeviceAllocator* memory,
    comm::AllReduceAlgorithm algorithm = comm::AllReduceAlgorithm::Auto);

// Decides, the same way on every worker, what carries the device
// collectives of workers on `device` (one small all-gather over
// groups.all off the CPU) and, for NCCL, gives each group its
// communicator (comm/nccl/nccl_groups.hpp). Every worker calls it. Throws
// ConfigError where `kind` is Nccl and NCCL cannot serve.
comm::DeviceCollectivesChoice use_device_collectives(comm::MeshGroups& groups, comm::DeviceCollectivesKind kind,
                                                     const Device& device, double timeout_s);

}  // namespace meshtrain::parallel
