// The two collectives sequence parallelism adds to the tensor-parallel
// interface, over a process group (threads as ranks, 1 to 4, odd ones too)
// and in the peerless SoloTensorGroup; values are small integers, so every
// sum is exact whatever its order.
#include <gtest/gtest.h>

#include "meshtrain/parallel/tensor/solo_tensor_group.hpp"
#include "tp_test_util.hpp"

namespace meshtrain::parallel {
namespace {

constexpr size_t kCount = 5;  // per rank

float value(int rank, size_t i) { return float(100 * rank + int(i)); }

TEST(TensorGroupCollectives, AllGatherConcatenatesTheRanksInOrder) {
  for (int ways : {1, 2, 3, 4}) {
    SCOPED_TRACE("T = " + std::to_string(ways));
    std::vector<std::vector<float>> got(static_cast<size_t>(ways));
    tp_test::run_tensor_ranks(ways, [&](int r, TensorParallelGroup& tp) {
      std::vector<float> out(kCount * size_t(ways));
      float* own = out.data() + size_t(r) * kCount;  // in place: the input is this rank's slot
      for (size_t i = 0; i < kCount; ++i) own[i] = value(r, i);
      tp.all_gather(own, out.data(), kCount);
      got[size_t(r)] = out;
    });
    for (int r = 0; r < ways; ++r)
      for (int q = 0; q < ways; ++q)
        for (size_t i = 0; i < kCount; ++i) EXPECT_EQ(got[size_t(r)][size_t(q) * kCount + i], value(q, i));
  }
}

TEST(TensorGroupCollectives, ReduceScatterSumGivesEachRankItsChunkOfTheSum) {
  for (int ways : {1, 2, 3, 4}) {
    SCOPED_TRACE("T = " + std::to_string(ways));
    std::vector<std::vector<float>> got(static_cast<size_t>(ways));
    tp_test::run_tensor_ranks(ways, [&](int r, TensorParallelGroup& tp) {
      std::vector<float> data(kCount * size_t(ways)), out(kCount);
      for (size_t i = 0; i < data.size(); ++i) data[i] = value(r, i);
      tp.reduce_scatter_sum(data.data(), out.data(), kCount);
      got[size_t(r)] = out;
    });
    for (int r = 0; r < ways; ++r)
      for (size_t i = 0; i < kCount; ++i) {
        float want = 0;
        for (int q = 0; q < ways; ++q) want += value(q, size_t(r) * kCount + i);
        EXPECT_EQ(got[size_t(r)][i], want) << "rank " << r << " element " << i;
      }
  }
}

// A bf16 wire (parallel.reduce_dtype): on 2 ranks each collective gives the
// bf16 rounding of what it would give on the rounded inputs, one rounding
// per sum, the same bits on both ranks; all_reduce_sum_fp32 stays exact.
TEST(TensorGroupCollectives, Bf16WireRoundsEachInputAndEachSumOnce) {
  const int ways = 2;
  auto input = [](int r, size_t i) { return 1.0f + 0.001f * float(i) + 0.0137f * float(r); };  // not bf16 values
  auto r16 = [](float x) { return to_float(to_bf16(x)); };
  const size_t n = 2 * kCount;
  std::vector<std::vector<float>> sums(ways), exact(ways), gathered(ways), scattered(ways);
  tp_test::run_tensor_ranks(
      ways,
      [&](int r, TensorParallelGroup& tp) {
        std::vector<float> a(n), b(n), g(n), out(kCount);
        for (size_t i = 0; i < n; ++i) a[i] = b[i] = input(r, i);
        tp.all_reduce_sum(a.data(), n);
        tp.all_reduce_sum_fp32(b.data(), n);
        tp.all_gather(b.data(), g.data(), kCount);  // b's first kCount: this rank's chunk
        std::vector<float> data(n);
        for (size_t i = 0; i < n; ++i) data[i] = input(r, i);
        tp.reduce_scatter_sum(data.data(), out.data(), kCount);
        sums[size_t(r)] = a, exact[size_t(r)] = b, gathered[size_t(r)] = g, scattered[size_t(r)] = out;
      },
      false, Precision::Bf16);
  EXPECT_EQ(sums[0], sums[1]) << "the same bits on every rank";
  EXPECT_EQ(gathered[0], gathered[1]);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(sums[0][i], r16(r16(input(0, i)) + r16(input(1, i)))) << i;
    EXPECT_EQ(exact[0][i], input(0, i) + input(1, i)) << i;
  }
  for (int q = 0; q < ways; ++q)
    for (size_t i = 0; i < kCount; ++i) EXPECT_EQ(gathered[0][size_t(q) * kCount + i], r16(exact[size_t(q)][i]));
  for (int r = 0; r < ways; ++r)
    for (size_t i = 0; i < kCount; ++i) {
      const size_t at = size_t(r) * kCount + i;
      EXPECT_EQ(scattered[size_t(r)][i], r16(r16(input(0, at)) + r16(input(1, at)))) << "rank " << r << " " << i;
    }
}

TEST(TensorGroupCollectives, SoloGroupKeepsItsOwnChunk) {
  SoloTensorGroup solo(1, 3, /*sequence_parallel=*/true);
  EXPECT_TRUE(solo.sequence_parallel());
  const std::vector<float> in = {1, 2};
  std::vector<float> gathered(6, -1);
  solo.all_gather(in.data(), gathered.data(), 2);
  EXPECT_EQ(gathered, (std::vector<float>{1, 2, 1, 2, 1, 2})) << "its chunk in every slot";
  std::vector<float> data = {0, 0, 3, 4, 0, 0}, out(2);
  solo.reduce_scatter_sum(data.data(), out.data(), 2);
  EXPECT_EQ(out, (std::vector<float>{3, 4}));
  EXPECT_FALSE(SoloTensorGroup(0, 2).sequence_parallel());
}

}  // namespace
}  // namespace meshtrain::parallel
