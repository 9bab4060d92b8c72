// DeviceTensorGroup (parallel/tensor/device_tensor_group.hpp) over the
// host-staged device collectives, threads as ranks: every call the layers
// make gives, bit for bit, what TensorParallelGroup gives on the host (fp32
// and a bf16 wire, 2 and 3 ranks, all-gathers in place or not, scatters
// into data's own chunk or elsewhere), with the values in a "device's"
// memory (the CPU backend's allocator: its copies are the staging).
// guarded_device.sh runs the same path in whole jobs on memory the host
// cannot touch.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "meshtrain/comm/device/host_staged_collectives.hpp"
#include "meshtrain/parallel/tensor/device_tensor_group.hpp"
#include "meshtrain/parallel/tensor/tensor_parallel_group.hpp"
#include "thread_ranks.hpp"

namespace meshtrain::parallel {
namespace {

constexpr size_t kPerRank = 37;

// Not bf16 values, different on every rank, so roundings and sums show.
float staged_value(int rank, size_t i) { return 0.731f * float(rank + 1) + 0.0137f * float(i) - 0.25f * float(i % 7); }

// Every result of one rank's sequence of calls, in order.
std::vector<float> every_result(int rank, nn::TensorParallelComm& tp) {
  const size_t ways = size_t(tp.size()), all = kPerRank * ways;
  std::vector<float> out;
  auto keep = [&](const std::vector<float>& v) { out.insert(out.end(), v.begin(), v.end()); };
  std::vector<float> x(all);
  for (size_t i = 0; i < all; ++i) x[i] = staged_value(rank, i);

  std::vector<float> a = x;
  tp.all_reduce_sum(a.data(), a.size());
  keep(a);
  a = x;
  tp.all_reduce_sum_fp32(a.data(), a.size());
  keep(a);
  a = x;
  tp.all_reduce_max(a.data(), a.size());
  keep(a);
  std::vector<int32_t> columns{int32_t(100 - rank), int32_t(7 + rank), -rank};
  tp.all_reduce_min(columns.data(), columns.size());
  for (int32_t c : columns) out.push_back(float(c));

  std::vector<float> gathered(all, -1.0f);  // from elsewhere
  tp.all_gather(x.data(), gathered.data(), kPerRank);
  keep(gathered);
  gathered = x;  // in place: the input is this rank's chunk of the output
  tp.all_gather(gathered.data() + size_t(rank) * kPerRank, gathered.data(), kPerRank);
  keep(gathered);

  std::vector<float> data = x, mine(kPerRank, -1.0f);  // into a buffer of its own
  tp.reduce_scatter_sum(data.data(), mine.data(), kPerRank);
  keep(mine);
  data = x;  // into data's own chunk
  float* own = data.data() + size_t(rank) * kPerRank;
  tp.reduce_scatter_sum(data.data(), own, kPerRank);
  keep(std::vector<float>(own, own + kPerRank));
  return out;
}

// The same calls on a DeviceTensorGroup: operands uploaded to the device's
// memory, results downloaded.
class TensorCallsOnDevice final : public nn::TensorParallelComm {
 public:
  TensorCallsOnDevice(comm::ProcessGroup& group, Precision wire)
      : backend_(kernels::cpu_backend()),
        tp_(std::make_unique<comm::HostStagedCollectives>(group, &backend_.allocator()), backend_, false, wire) {}
  int rank() const override { return tp_.rank(); }
  int size() const override { return tp_.size(); }
  void all_reduce_sum(float* data, size_t count) override {
    round_trip(data, count, [&](float* d) { tp_.all_reduce_sum(d, count); });
  }
  void all_reduce_sum_fp32(float* data, size_t count) override {
    round_trip(data, count, [&](float* d) { tp_.all_reduce_sum_fp32(d, count); });
  }
  void all_reduce_max(float* data, size_t count) override {
    round_trip(data, count, [&](float* d) { tp_.all_reduce_max(d, count); });
  }
  void all_reduce_min(int32_t* data, size_t count) override {
    DeviceArray<int32_t> d(backend_.allocator(), MemoryKind::Activations);
    d.ensure(count);
    d.upload(std::vector<int32_t>(data, data + count));
    tp_.all_reduce_min(d.raw(), count);
    const std::vector<int32_t> back = d.to_host();
    std::memcpy(data, back.data(), count * sizeof(int32_t));
  }
  void all_gather(const float* in, float* out, size_t count_per_rank) override {
    const size_t count = count_per_rank * size_t(size());
    const bool in_place = in == out + count_per_rank * size_t(rank());
    DeviceArray<float> src = upload(in, count_per_rank), dst = upload(out, count);
    tp_.all_gather(in_place ? dst.raw() + count_per_rank * size_t(rank()) : src.raw(), dst.raw(), count_per_rank);
    download(dst, out);
  }
  void reduce_scatter_sum(float* data, float* out, size_t count_per_rank) override {
    const size_t count = count_per_rank * size_t(size()), at = count_per_rank * size_t(rank());
    const bool own = out == data + at;
    DeviceArray<float> d = upload(data, count), o = upload(out, count_per_rank);
    tp_.reduce_scatter_sum(d.raw(), own ? d.raw() + at : o.raw(), count_per_rank);
    if (own) {
      const std::vector<float> back = d.to_host();
      std::memcpy(out, back.data() + at, count_per_rank * sizeof(float));
    } else {
      download(o, out);
    }
  }

 private:
  DeviceArray<float> upload(const float* host, size_t count) {
    DeviceArray<float> d(backend_.allocator(), MemoryKind::Activations);
    d.ensure(count);
    d.upload(std::vector<float>(host, host + count));
    return d;
  }
  static void download(const DeviceArray<float>& d, float* host) {
    const std::vector<float> back = d.to_host();
    std::memcpy(host, back.data(), back.size() * sizeof(float));
  }
  template <class Call>
  void round_trip(float* data, size_t count, Call&& call) {
    DeviceArray<float> d = upload(data, count);
    call(d.raw());
    download(d, data);
  }

  kernels::Backend& backend_;
  DeviceTensorGroup tp_;
};

TEST(DeviceTensorGroup, GivesTheHostGroupsBitsForEveryCallTheLayersMake) {
  for (Precision wire : {Precision::Fp32, Precision::Bf16})
    for (int ways : {2, 3}) {
      SCOPED_TRACE(std::string(wire == Precision::Bf16 ? "bf16" : "fp32") + " wire, " + std::to_string(ways) +
                   " ranks");
      std::vector<std::vector<float>> host(static_cast<size_t>(ways)), device(static_cast<size_t>(ways));
      testing::on_inproc_ranks(ways, [&](int r, comm::ProcessGroup& group) {
        TensorParallelGroup on_host(group, false, wire);
        host[size_t(r)] = every_result(r, on_host);
        TensorCallsOnDevice on_device(group, wire);
        device[size_t(r)] = every_result(r, on_device);
      });
      for (int r = 0; r < ways; ++r) {
        ASSERT_EQ(device[size_t(r)].size(), host[size_t(r)].size());
        EXPECT_EQ(0, std::memcmp(device[size_t(r)].data(), host[size_t(r)].data(), host[size_t(r)].size() * 4))
            << "rank " << r;
      }
      // Real sums, not copies: rank 0's first element is the sum over the ranks.
      float want = 0;
      for (int q = 0; q < ways; ++q) want += staged_value(q, 0);
      EXPECT_NEAR(device[0][0], want, wire == Precision::Bf16 ? 0.02f : 1e-6f);
    }
}

TEST(DeviceTensorGroup, KeepsTheGroupsShapeAndSequenceParallelism) {
  testing::on_inproc_ranks(2, [&](int r, comm::ProcessGroup& group) {
    kernels::Backend& cpu = kernels::cpu_backend();
    DeviceTensorGroup tp(std::make_unique<comm::HostStagedCollectives>(group, &cpu.allocator()), cpu, true);
    EXPECT_EQ(tp.rank(), r);
    EXPECT_EQ(tp.size(), 2);
    EXPECT_TRUE(tp.sequence_parallel());
  });
}

}  // namespace
}  // namespace meshtrain::parallel
