// A job's groups on NCCL (comm/nccl/nccl_groups.hpp, and the choice in
// parallel/device_collectives.hpp), on one GPU with one worker: the job
// decides on NCCL (its one worker has a GPU of its own and libnccl loads),
// every group the mesh cut gets a communicator split from the workers' one,
// and a strategy's collectives through a group reduce on the GPU bitwise.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "meshtrain/comm/nccl/nccl_collectives.hpp"
#include "meshtrain/comm/transport/inproc/inproc_transport.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/kernels/cuda/cuda_memory.hpp"
#include "meshtrain/parallel/device_collectives.hpp"
#include "unit/cuda/gpu_test_util.hpp"

namespace meshtrain::comm::nccl {
namespace {

using test::to_device;
using test::to_host;

TEST(NcclGroups, AOneGpuWorkerChoosesNcclAndEveryGroupReducesThroughIt) {
  MESHTRAIN_REQUIRE_GPU();
  const Device gpu{.kind = DeviceKind::Cuda, .index = 0};
  auto transports = make_inproc_transports(1);
  MeshGroups groups = mesh_groups(DeviceMesh(MeshShape{}, 1), std::make_shared<Communicator>(std::move(transports[0])));
  const bool order_preset = std::getenv("NCCL_LAUNCH_ORDER_IMPLICIT") != nullptr;  // a user's value wins
  const DeviceCollectivesChoice choice =
      parallel::use_device_collectives(groups, DeviceCollectivesKind::Nccl, gpu, 30.0);
  EXPECT_TRUE(choice.nccl);
  EXPECT_EQ(choice.why.rfind("every one of the 1 workers has a GPU of its own; NCCL 2.", 0), 0u) << choice.why;
  // NCCL_LAUNCH_ORDER_IMPLICIT keeps the communicators of one GPU in the host's order
  // (comm/nccl/environment.hpp).
  if (!order_preset) {
    EXPECT_STREQ(std::getenv("NCCL_LAUNCH_ORDER_IMPLICIT"), "1");
  }
  ASSERT_NE(groups.all->device_engine(), nullptr);
  ASSERT_NE(groups.find(MeshAxis::Data), nullptr);
  ASSERT_NE(groups[MeshAxis::Data].device_engine(), nullptr);

  auto& memory = dynamic_cast<kernels::cuda::CudaAllocator&>(kernels::backend_for(gpu).allocator());
  std::vector<float> in(1031);
  for (size_t i = 0; i < in.size(); ++i) in[i] = 0.3f * float(i) - 11.0f;
  for (ProcessGroup* group : {groups.all.get(), groups.find(MeshAxis::Data)}) {
    std::unique_ptr<DeviceCollectives> collectives = group->device_engine()->collectives();
    EXPECT_NE(dynamic_cast<NcclCollectives*>(collectives.get()), nullptr) << group->name();
    auto values = to_device(memory, in);
    collectives->all_reduce_async(Buffer(values.ptr().raw(), in.size(), comm::DataType::F32), ReduceKind::Sum)->wait();
    EXPECT_EQ(to_host(values), in) << group->name();
  }
}

}  // namespace
}  // namespace meshtrain::comm::nccl
