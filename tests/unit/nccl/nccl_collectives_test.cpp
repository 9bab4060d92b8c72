// NcclCollectives, the device collectives over NCCL: the type and
// reduction mapping (here), and a one-rank communicator through the
// interface the strategies call (on a GPU: all-reduce, reduce-scatter,
// all-gather and broadcast bitwise, timed, stream-ordered).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <vector>

#include "meshtrain/comm/nccl/nccl_collectives.hpp"
#include "meshtrain/comm/rendezvous/store_client.hpp"
#include "meshtrain/comm/rendezvous/store_server.hpp"
#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/cuda/cuda_memory.hpp"
#include "unit/cuda/gpu_test_util.hpp"

namespace meshtrain::comm::nccl {
namespace {

using kernels::cuda::CudaAllocator;
using test::to_device;
using test::to_host;

TEST(NcclCollectives, MapsTheTypesAndReductionsNcclHasAndRefusesTheRest) {
  EXPECT_EQ(nccl_data_type(comm::DataType::F32), DataType::Fp32);
  EXPECT_EQ(nccl_data_type(comm::DataType::BF16), DataType::Bf16);
  EXPECT_EQ(nccl_data_type(comm::DataType::I32), DataType::Int32);  // tensor parallelism's argmax
  EXPECT_EQ(nccl_data_type(comm::DataType::I64), DataType::Int64);
  EXPECT_THROW(nccl_data_type(comm::DataType::F64), CommError);
  EXPECT_EQ(nccl_reduction(ReduceKind::Avg), Reduction::Avg);
  EXPECT_EQ(nccl_reduction(ReduceKind::Max), Reduction::Max);
  EXPECT_EQ(nccl_reduction(ReduceKind::Min), Reduction::Min);
}

// A one-rank communicator, joined through a store of its own, and its
// collectives on the allocator's stream.
struct OneRank {
  CudaAllocator alloc;
  rendezvous::TcpStore store{rendezvous::StoreOptions{"127.0.0.1", 0, "t", "nccl-test", 1, {}}};
  rendezvous::StoreClient client{
      rendezvous::StoreClientOptions{{"127.0.0.1", store.port()}, "t", "nccl-test", 0, 1, std::chrono::seconds(5)}};
  NcclCommunicator communicator = NcclCommunicator::join(client, "nccl/collectives", 0, {0}, "data", 30.0);
  NcclCollectives collectives{communicator, alloc.stream()};
};

TEST(NcclCollectives, OneRankReducesAndBroadcastsInPlaceBitForBit) {
  MESHTRAIN_REQUIRE_GPU();
  OneRank one;
  CudaAllocator& alloc = one.alloc;
  NcclCollectives& collectives = one.collectives;
  EXPECT_EQ(collectives.size(), 1);

  std::vector<float> in(4099);
  for (size_t i = 0; i < in.size(); ++i) in[i] = 0.1f * float(i) - 7.0f;
  auto grads = to_device(alloc, in);
  DeviceWorkHandle work = collectives.all_reduce_async(Buffer(grads.ptr().raw(), in.size(), comm::DataType::F32),
                                                       ReduceKind::Avg);
  work->wait();
  EXPECT_GE(work->busy_seconds(), 0.0);
  EXPECT_EQ(to_host(grads), in);

  std::vector<Bf16> wire(in.size());
  for (size_t i = 0; i < in.size(); ++i) wire[i] = to_bf16(in[i]);
  auto wire_d = to_device(alloc, wire);
  collectives.all_reduce_async(Buffer(wire_d.ptr().raw(), wire.size(), comm::DataType::BF16), ReduceKind::Sum)->wait();
  const std::vector<Bf16> back = to_host(wire_d);
  for (size_t i = 0; i < wire.size(); ++i) ASSERT_EQ(back[i].bits, wire[i].bits) << i;

  auto shard = to_device(alloc, std::vector<float>(in.size(), -1.0f));
  collectives.reduce_scatter_async(Buffer(grads.ptr().raw(), in.size(), comm::DataType::F32),
                                   Buffer(shard.ptr().raw(), in.size(), comm::DataType::F32), ReduceKind::Avg)->wait();
  EXPECT_EQ(to_host(shard), in);
  EXPECT_THROW(collectives.reduce_scatter_async(Buffer(grads.ptr().raw(), in.size(), comm::DataType::F32),
                                                Buffer(shard.ptr().raw(), 7, comm::DataType::F32), ReduceKind::Avg),
               CommError);

  collectives.all_gather_async(Buffer(grads.ptr().raw(), in.size(), comm::DataType::F32))->wait();
  EXPECT_EQ(to_host(grads), in);

  collectives.broadcast(Buffer(grads.ptr().raw(), in.size(), comm::DataType::F32), 0);
  EXPECT_EQ(to_host(grads), in);

  const std::vector<int32_t> columns{7, -3, 1 << 30};  // tensor parallelism's argmax: a minimum of int32
  auto columns_d = to_device(alloc, columns);
  collectives.all_reduce_async(Buffer(columns_d.ptr().raw(), columns.size(), comm::DataType::I32), ReduceKind::Min)
      ->wait();
  EXPECT_EQ(to_host(columns_d), columns);
  EXPECT_EQ(collectives.rank(), 0);

  // A pipeline's grouped send and receive, here to itself.
  auto arrived = to_device(alloc, std::vector<float>(in.size(), -1.0f));
  collectives
      .exchange_async({{0, comm::ConstBuffer(grads.ptr().raw(), in.size(), comm::DataType::F32)}},
                      {{0, Buffer(arrived.ptr().raw(), in.size(), comm::DataType::F32)}})
      ->wait();
  EXPECT_EQ(to_host(arrived), in);
}

// The overlap report's exposed time (overlap_ledger.hpp): a collective that
// ended before the compute stream reached the mark is 0 s after it, and
// asking leaves no error behind for the next launch to report (the
// elapsed time of a pending event is cudaErrorNotReady, which the runtime
// keeps as the thread's last error).
TEST(NcclCollectives, WorkEndedBeforeTheMarkIsZeroSecondsAfterItAndLeavesNoError) {
  MESHTRAIN_REQUIRE_GPU();
  OneRank one;
  CudaAllocator& alloc = one.alloc;
  NcclCollectives& collectives = one.collectives;
  auto grads = to_device(alloc, std::vector<float>(1024, 1.0f));
  const Buffer buffer(grads.ptr().raw(), 1024, comm::DataType::F32);

  const std::shared_ptr<DeviceMark> before = collectives.mark_compute();
  DeviceWorkHandle early = collectives.all_reduce_async(buffer, ReduceKind::Sum);
  // Compute queued behind the collective: ~20 memsets of 1 GiB, tens of ms on an H100.
  void* slow = nullptr;
  ASSERT_EQ(cudaMallocAsync(&slow, size_t(1) << 30, alloc.stream()), cudaSuccess);
  for (int i = 0; i < 20; ++i) ASSERT_EQ(cudaMemsetAsync(slow, i, size_t(1) << 30, alloc.stream()), cudaSuccess);
  const std::shared_ptr<DeviceMark> after = collectives.mark_compute();
  ASSERT_TRUE(before && after);
  EXPECT_EQ(early->seconds_after(*after), 0.0);
  EXPECT_GE(early->seconds_after(*before), 0.0);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  early->wait();
  ASSERT_EQ(cudaFreeAsync(slow, alloc.stream()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(alloc.stream()), cudaSuccess);
  EXPECT_EQ(to_host(grads), std::vector<float>(1024, 1.0f));
}

}  // namespace
}  // namespace meshtrain::comm::nccl
