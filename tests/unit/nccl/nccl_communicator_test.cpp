// NCCL communicators of one rank on GPU 0 (comm/nccl/nccl_communicator.hpp):
// two ranks of one communicator cannot share a GPU (docs/gpu.md), so on a
// machine with one GPU each operation runs on a communicator of one rank,
// which exercises the API, the communication stream, its events and
// ncclCommSplit, and must give back its input bit for bit. The id travels
// through meshtrain's own rendezvous store, as in a job. Skipped where there
// is no GPU; the status text needs none. scripts/gpu-check.sh runs them
// where the GPU machine has libnccl.so.2.
#ifdef MESHTRAIN_HAVE_NCCL
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "meshtrain/comm/nccl/nccl_communicator.hpp"
#include "meshtrain/comm/rendezvous/store_client.hpp"
#include "meshtrain/comm/rendezvous/store_server.hpp"
#include "meshtrain/kernels/cuda/cuda_memory.hpp"
#include "unit/cuda/gpu_test_util.hpp"

namespace meshtrain::comm::nccl {
namespace {

using kernels::cuda::CudaAllocator;
using test::to_device;
using test::to_host;

std::vector<float> values(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.37f * float(i) - 11.0f + 1e-7f * float(i * i);
  return v;
}

// A communicator of one rank, its id through a real store.
NcclCommunicator solo(const std::string& name) {
  rendezvous::TcpStore store(rendezvous::StoreOptions{"127.0.0.1", 0, "t", "nccl-test", 1, {}});
  rendezvous::StoreClient client(
      rendezvous::StoreClientOptions{{"127.0.0.1", store.port()}, "t", "nccl-test", 0, 1, std::chrono::seconds(5)});
  return NcclCommunicator::join(client, "nccl/" + name, 0, {0}, name, 30.0);
}

TEST(NcclStatus, TextNamesTheStatusWithoutAGpu) {
  EXPECT_EQ(nccl_status_text(ncclSuccess).rfind("ncclSuccess (0): ", 0), 0u);
  EXPECT_NE(nccl_status_text(ncclInvalidArgument).find("ncclInvalidArgument (4)"), std::string::npos);
  EXPECT_EQ(element_bytes(DataType::Bf16), 2u);
}

TEST(NcclCommunicator, OneRankGivesBackItsInputBitForBit) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  NcclCommunicator comm = solo("data");
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  const std::vector<float> in = values(1000);
  auto a = to_device(alloc, in), b = to_device(alloc, std::vector<float>(in.size(), -1.0f));
  comm.after_compute(alloc.stream());  // the uploads are on the allocator's stream
  comm.all_reduce(a.ptr().raw(), in.size(), DataType::Fp32, Reduction::Sum);
  comm.all_reduce(a.ptr().raw(), in.size(), DataType::Fp32, Reduction::Avg);
  comm.broadcast(a.ptr().raw(), in.size(), DataType::Fp32, 0);
  comm.all_gather(a.ptr().raw(), b.ptr().raw(), in.size(), DataType::Fp32);
  comm.wait();
  EXPECT_EQ(to_host(a), in);
  EXPECT_EQ(to_host(b), in);
  auto c = to_device(alloc, std::vector<float>(in.size(), -1.0f));
  comm.reduce_scatter(b.ptr().raw(), c.ptr().raw(), in.size(), DataType::Fp32, Reduction::Sum);
  const std::vector<size_t> counts{in.size()};
  auto d = to_device(alloc, std::vector<float>(in.size(), -1.0f));
  comm.all_to_all_v(c.ptr().raw(), counts, d.ptr().raw(), counts, DataType::Fp32);
  comm.before_compute(alloc.stream());
  comm.wait();
  EXPECT_EQ(to_host(c), in);
  EXPECT_EQ(to_host(d), in);
}

TEST(NcclCommunicator, ASplitCommunicatorWorksAndBf16AndInt64Travel) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  NcclCommunicator world = solo("all");
  NcclCommunicator tensor = world.split(/*color=*/0, /*key=*/0, {0}, "tensor");
  EXPECT_EQ(tensor.size(), 1);
  std::vector<uint16_t> half(257);
  for (size_t i = 0; i < half.size(); ++i) half[i] = uint16_t(0x3f80 + i);
  std::vector<int64_t> counts{3, -7, int64_t(1) << 40};
  auto h = to_device(alloc, half);
  auto n = to_device(alloc, counts);
  tensor.after_compute(alloc.stream());
  tensor.all_reduce(h.ptr().raw(), half.size(), DataType::Bf16, Reduction::Sum);
  tensor.all_reduce(n.ptr().raw(), counts.size(), DataType::Int64, Reduction::Max);
  tensor.wait();
  EXPECT_EQ(to_host(h), half);
  EXPECT_EQ(to_host(n), counts);
}

TEST(NcclCommunicator, AMisuseIsACommErrorNamingTheOperation) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  NcclCommunicator comm = solo("pipeline");
  auto a = to_device(alloc, values(8));
  try {
    comm.broadcast(a.ptr().raw(), 8, DataType::Fp32, /*root=*/3);  // no rank 3
    comm.wait();
    ADD_FAILURE() << "a broadcast from rank 3 of 1 was accepted";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("'pipeline'"), std::string::npos) << e.what();
  }
  const std::vector<size_t> two{4, 4};
  EXPECT_THROW(comm.all_to_all_v(a.ptr().raw(), two, a.ptr().raw(), two, DataType::Fp32), Error);
}

}  // namespace
}  // namespace meshtrain::comm::nccl
#endif  // MESHTRAIN_HAVE_NCCL
