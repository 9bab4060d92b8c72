// The bucket plan: buckets tile the flat buffer, hold whole tensors, go from
// the last tensor backwards, and respect the size limits.
#include <gtest/gtest.h>

#include "meshtrain/parallel/data_parallel/gradient_buckets.hpp"

namespace meshtrain::parallel {
namespace {

ParamStore store_of(std::vector<int64_t> sizes) {
  ParamStore s;
  for (size_t i = 0; i < sizes.size(); ++i) s.declare("t" + std::to_string(i), {sizes[i]}, true);
  s.allocate();
  return s;
}

TEST(GradientBuckets, TileTheBufferFromTheLastTensor) {
  // 16-element alignment: 10 -> 16 elements (64 B), 100 -> 112 (448 B), 40 -> 48 (192 B), 5 -> 16 (64 B)
  ParamStore s = store_of({10, 100, 40, 5});
  auto buckets = plan_gradient_buckets(s, 400, 50);
  ASSERT_EQ(buckets.size(), 3u);
  // First bucket closes at 50 bytes: t3 (64 B) alone.
  EXPECT_EQ(buckets[0].first_view, 3u);
  EXPECT_EQ(buckets[0].end_view, 4u);
  EXPECT_EQ(buckets[0].end, s.flat_size());
  // Then t2 + t1 (640 B >= 400).
  EXPECT_EQ(buckets[1].first_view, 1u);
  EXPECT_EQ(buckets[1].end_view, 3u);
  // Last, t0 alone (64 B >= 50): the tensor backward finishes last, which starts the buffer.
  EXPECT_EQ(buckets[2].first_view, 0u);
  EXPECT_EQ(buckets[2].end_view, 1u);
  EXPECT_EQ(buckets[2].begin, 0u);
  for (size_t b = 0; b + 1 < buckets.size(); ++b) EXPECT_EQ(buckets[b].begin, buckets[b + 1].end) << b;
}

TEST(GradientBuckets, SmallLastBucketGathersTheFirstTensors) {
  ParamStore s = store_of({10, 10, 100, 40, 5});  // 64 + 64 + 448 + 192 + 64 bytes
  auto buckets = plan_gradient_buckets(s, 1 << 20, 100);
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].first_view, 3u);  // t4 + t3 >= 100
  EXPECT_EQ(buckets[1].first_view, 2u);  // the rest of the middle, however big the limit
  EXPECT_EQ(buckets[1].end_view, 3u);
  EXPECT_EQ(buckets[2].first_view, 0u);  // t0 + t1 >= 100
  EXPECT_EQ(buckets[2].end_view, 2u);
}

TEST(GradientBuckets, OneBigBucketAndEmptyStore) {
  ParamStore s = store_of({10, 100, 40, 5});
  auto one = plan_gradient_buckets(s, size_t{1} << 30, size_t{1} << 30);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].begin, 0u);
  EXPECT_EQ(one[0].end, s.flat_size());
  ParamStore empty;
  empty.allocate();
  EXPECT_TRUE(plan_gradient_buckets(empty, 100, 100).empty());
}

TEST(GradientBuckets, TinyLimitGivesOneTensorPerBucket) {
  ParamStore s = store_of({3, 3, 3});
  auto buckets = plan_gradient_buckets(s, 1, 1);
  ASSERT_EQ(buckets.size(), 3u);
  for (size_t b = 0; b < 3; ++b) EXPECT_EQ(buckets[b].end_view - buckets[b].first_view, 1u);
}

}  // namespace
TEST(GradientBuckets, ExpertTensorsNeverShareABucketWithDenseOnes) {
  // dense t0, t1; experts t2, t3; dense t4: even one huge limit splits at
  // each change, since expert gradients are reduced over other ranks.
  ParamStore s;
  s.declare("t0", {10}, true);
  s.declare("t1", {10}, true);
  {
    ExpertScope experts(s);
    s.declare("t2", {10}, true);
    s.declare("t3", {10}, true);
  }
  s.declare("t4", {10}, true);
  s.allocate();
  auto buckets = plan_gradient_buckets(s, size_t{1} << 30, size_t{1} << 30);
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].first_view, 4u);
  EXPECT_FALSE(buckets[0].expert);
  EXPECT_EQ(buckets[1].first_view, 2u);
  EXPECT_EQ(buckets[1].end_view, 4u);
  EXPECT_TRUE(buckets[1].expert);
  EXPECT_EQ(buckets[2].first_view, 0u);
  EXPECT_EQ(buckets[2].end_view, 2u);
  EXPECT_FALSE(buckets[2].expert);
  EXPECT_EQ(buckets[2].begin, 0u);
  for (size_t b = 0; b + 1 < buckets.size(); ++b) EXPECT_EQ(buckets[b].begin, buckets[b + 1].end) << b;
}

}  // namespace meshtrain::parallel
