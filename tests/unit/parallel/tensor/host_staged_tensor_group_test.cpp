// HostStagedTensorGroup (parallel/tensor/host_staged_tensor_group.hpp) over
// the guarded device's memory, which faults on any host access outside the
// allocator's copies: each collective reaches the host group with the
// device's values, in the places the host group expects them (this rank's
// chunk of an all-gather, of a reduce-scatter), and its result lands back
// on the device. The host group here is rank 1 of 2 whose peer's
// contributions are fixed numbers, so every element's result is known.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "meshtrain/core/device_array.hpp"
#include "meshtrain/kernels/guarded_backend.hpp"
#include "meshtrain/parallel/tensor/host_staged_tensor_group.hpp"

namespace meshtrain::parallel {
namespace {

// Rank 1 of 2; the peer (rank 0) holds 100 + i at element i of whatever it sends.
class PeerOfFixedValues final : public nn::TensorParallelComm {
 public:
  int rank() const override { return 1; }
  int size() const override { return 2; }
  bool sequence_parallel() const override { return true; }
  void all_reduce_sum(float* data, size_t count) override {
    for (size_t i = 0; i < count; ++i) data[i] += 100.0f + float(i);
  }
  void all_reduce_sum_fp32(float* data, size_t count) override { all_reduce_sum(data, count); }
  void all_reduce_max(float* data, size_t count) override {
    for (size_t i = 0; i < count; ++i) data[i] = std::max(data[i], 100.0f + float(i));
  }
  void all_reduce_min(int32_t* data, size_t count) override {
    for (size_t i = 0; i < count; ++i) data[i] = std::min(data[i], int32_t(100 + i));
  }
  void all_gather(const float* in, float* out, size_t count_per_rank) override {
    EXPECT_EQ(in, out + count_per_rank) << "this rank's chunk is gathered in place";
    for (size_t i = 0; i < count_per_rank; ++i) out[i] = 100.0f + float(i);
  }
  void reduce_scatter_sum(float* data, float* out, size_t count_per_rank) override {
    for (size_t i = 0; i < count_per_rank; ++i) out[i] = data[count_per_rank + i] + 100.0f + float(i);
  }
};

struct Staged {
  kernels::Backend& device = kernels::guarded_backend();
  HostStagedTensorGroup group{std::make_unique<PeerOfFixedValues>(), device.allocator()};
  DeviceArray<float> on_device(const std::vector<float>& values) {
    DeviceArray<float> a(device.allocator(), MemoryKind::Activations);
    a.ensure(values.size());
    a.upload(values);
    return a;
  }
};

TEST(HostStagedTensorGroup, ReducesTheDevicesValuesInPlace) {
  Staged s;
  EXPECT_EQ(s.group.rank(), 1);
  EXPECT_EQ(s.group.size(), 2);
  EXPECT_TRUE(s.group.sequence_parallel());
  DeviceArray<float> x = s.on_device({1, 2, 3});
  s.group.all_reduce_sum(x.raw(), 3);
  EXPECT_EQ(x.to_host(), (std::vector<float>{101, 103, 105}));
  s.group.all_reduce_max(x.raw(), 2);
  EXPECT_EQ(x.to_host(), (std::vector<float>{101, 103, 105}));
  DeviceArray<int32_t> idx(s.device.allocator(), MemoryKind::Activations);
  idx.ensure(2);
  idx.upload(std::vector<int32_t>{500, 7});
  s.group.all_reduce_min(idx.raw(), 2);
  EXPECT_EQ(idx.to_host(), (std::vector<int32_t>{100, 7}));
}

TEST(HostStagedTensorGroup, GathersAndScattersThisRanksChunk) {
  Staged s;
  DeviceArray<float> mine = s.on_device({7, 8}), all = s.on_device({-1, -1, -1, -1});
  s.group.all_gather(mine.raw(), all.raw(), 2);
  EXPECT_EQ(all.to_host(), (std::vector<float>{100, 101, 7, 8}));
  DeviceArray<float> partial = s.on_device({1, 2, 3, 4}), out = s.on_device({-1, -1});
  s.group.reduce_scatter_sum(partial.raw(), out.raw(), 2);
  EXPECT_EQ(out.to_host(), (std::vector<float>{103, 105}));  // this rank's chunk (3, 4) plus the peer's
}

}  // namespace
}  // namespace meshtrain::parallel
