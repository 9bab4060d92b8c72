#include "meshtrain/data/sampler.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "meshtrain/core/error.hpp"

namespace meshtrain {
namespace {

using Indices = std::vector<int64_t>;

// The next `steps` global batches as n ranks would see them, concatenated in
// rank order per step: one sampler per rank, all starting from `from`.
Indices run_ranks(int64_t N, int64_t B, int n, uint64_t seed, int64_t steps,
                  SamplerState from = {}, SamplerState* end = nullptr) {
  std::vector<DistributedSampler> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back(N, B, r, n, seed);
    ranks.back().restore(from);
  }
  Indices out;
  for (int64_t s = 0; s < steps; ++s)
    for (auto& rank : ranks) {
      auto idx = rank.next();
      out.insert(out.end(), idx.begin(), idx.end());
    }
  for (auto& rank : ranks) EXPECT_EQ(rank.state(), ranks[0].state());  // ranks agree on state
  if (end) *end = ranks[0].state();
  return out;
}

TEST(DistributedSampler, PermutationIsAPermutationAndDependsOnSeedAndEpoch) {
  Indices a, b, c;
  DistributedSampler::permutation(1000, 7, 0, a);
  DistributedSampler::permutation(1000, 7, 1, b);
  DistributedSampler::permutation(1000, 8, 0, c);
  Indices sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  Indices again;
  DistributedSampler::permutation(1000, 7, 0, again);
  EXPECT_EQ(a, again);
}

TEST(DistributedSampler, Deterministic) {
  EXPECT_EQ(run_ranks(97, 5, 1, 42, 40), run_ranks(97, 5, 1, 42, 40));
  EXPECT_NE(run_ranks(97, 5, 1, 42, 40), run_ranks(97, 5, 1, 43, 40));
}

TEST(DistributedSampler, RanksPartitionTheGlobalBatch) {
  const int64_t N = 100, B = 3;
  for (int n : {1, 2, 3, 5, 7}) {
    std::vector<DistributedSampler> ranks;
    for (int r = 0; r < n; ++r) ranks.emplace_back(N, B, r, n, 1);
    for (int step = 0; step < 4; ++step) {
      std::set<int64_t> seen;
      for (auto& rank : ranks) {
        auto idx = rank.next();
        ASSERT_EQ(idx.size(), static_cast<size_t>(B));
        seen.insert(idx.begin(), idx.end());
      }
      EXPECT_EQ(seen.size(), static_cast<size_t>(n * B)) << "n=" << n;  // disjoint
    }
  }
}

TEST(DistributedSampler, UnionOverRanksIsOneProcessWithGlobalBatch) {
  const int64_t N = 250, B = 4;
  for (int n : {1, 2, 3, 4, 8}) {
    // 3 epochs' worth of steps, so rollover is covered too.
    const int64_t steps = 3 * (N / (n * B)) + 2;
    EXPECT_EQ(run_ranks(N, B, n, 9, steps), run_ranks(N, n * B, 1, 9, steps)) << "n=" << n;
  }
}

TEST(DistributedSampler, EpochRolloverDropsTheIncompleteBatch) {
  const int64_t N = 10, B = 3;  // 3 full batches, 1 sample dropped per epoch
  DistributedSampler s(N, B, 0, 1, 5);
  EXPECT_EQ(s.steps_per_epoch(), 3);
  Indices perm0, perm1;
  DistributedSampler::permutation(N, 5, 0, perm0);
  DistributedSampler::permutation(N, 5, 1, perm1);
  Indices epoch0;
  for (int i = 0; i < 3; ++i) {
    auto idx = s.next();
    epoch0.insert(epoch0.end(), idx.begin(), idx.end());
  }
  EXPECT_EQ(epoch0, Indices(perm0.begin(), perm0.begin() + 9));
  EXPECT_EQ(s.state(), (SamplerState{0, 9}));
  auto idx = s.next();  // starts epoch 1
  EXPECT_EQ(Indices(idx.begin(), idx.end()), Indices(perm1.begin(), perm1.begin() + 3));
  EXPECT_EQ(s.state(), (SamplerState{1, 3}));
}

TEST(DistributedSampler, ResumeFromStateGivesTheSameContinuation) {
  const int64_t N = 200, B = 4;
  for (int n : {1, 3}) {
    SamplerState mid;
    const Indices full = run_ranks(N, B, n, 11, 30);
    const Indices first = run_ranks(N, B, n, 11, 13, {}, &mid);
    const Indices rest = run_ranks(N, B, n, 11, 17, mid);
    Indices joined = first;
    joined.insert(joined.end(), rest.begin(), rest.end());
    EXPECT_EQ(joined, full) << "n=" << n;
  }
}

// Saved by 4 ranks, resumed by 2 (and the reverse): within each epoch every
// sample up to the dropped tail is seen exactly once, in permutation order.
TEST(DistributedSampler, ResumeWithAnotherWorldSizeNeitherRepeatsNorSkips) {
  const int64_t N = 103, B = 2;
  for (auto [before, after] : {std::pair{4, 2}, std::pair{2, 4}, std::pair{3, 5}}) {
    SamplerState mid;
    const Indices first = run_ranks(N, B, before, 3, 5, {}, &mid);
    EXPECT_EQ(mid, (SamplerState{0, 5 * before * B}));
    // Enough steps to finish epoch 0 (and start epoch 1) with the new world size.
    const int64_t left = (N - mid.position) / (after * B);
    SamplerState end;
    const Indices rest = run_ranks(N, B, after, 3, left + 1, mid, &end);
    EXPECT_EQ(end.epoch, 1);

    Indices epoch0 = first;
    epoch0.insert(epoch0.end(), rest.begin(), rest.end() - after * B);
    Indices perm0;
    DistributedSampler::permutation(N, 3, 0, perm0);
    ASSERT_LE(epoch0.size(), perm0.size());
    EXPECT_GT(epoch0.size() + static_cast<size_t>(after * B), perm0.size());  // only a tail dropped
    EXPECT_EQ(epoch0, Indices(perm0.begin(), perm0.begin() + static_cast<int64_t>(epoch0.size())));
    EXPECT_EQ(std::set<int64_t>(epoch0.begin(), epoch0.end()).size(), epoch0.size());
  }
}

TEST(DistributedSampler, RestoreAtEpochEndRollsOverOnNext) {
  DistributedSampler s(10, 5, 0, 1, 0);
  s.restore({2, 10});
  s.next();
  EXPECT_EQ(s.state(), (SamplerState{3, 5}));
}

TEST(DistributedSampler, RejectsBadArguments) {
  EXPECT_THROW(DistributedSampler(10, 0, 0, 1, 0), ConfigError);
  EXPECT_THROW(DistributedSampler(10, 2, 0, 0, 0), ConfigError);
  EXPECT_THROW(DistributedSampler(10, 2, 2, 2, 0), ConfigError);
  EXPECT_THROW(DistributedSampler(10, 2, -1, 2, 0), ConfigError);
  EXPECT_THROW(DistributedSampler(10, 4, 0, 3, 0), ConfigError);  // 12 > 10 samples
  EXPECT_NO_THROW(DistributedSampler(12, 4, 2, 3, 0));
  DistributedSampler s(10, 2, 0, 1, 0);
  EXPECT_THROW(s.restore({0, 11}), ConfigError);
  EXPECT_THROW(s.restore({-1, 0}), ConfigError);
}

TEST(SequentialSampler, InOrderAndDropsTheTail) {
  SequentialSampler s(10, 3);
  EXPECT_EQ(s.num_batches(), 3);
  auto b0 = s.batch(0);
  EXPECT_EQ(Indices(b0.begin(), b0.end()), (Indices{0, 1, 2}));
  auto b2 = s.batch(2);
  EXPECT_EQ(Indices(b2.begin(), b2.end()), (Indices{6, 7, 8}));
  EXPECT_THROW(s.batch(3), ConfigError);
  EXPECT_EQ(SequentialSampler(2, 3).num_batches(), 0);
}

// Two ranks with batch 2 split each global batch of 4 the way one process
// with batch 4 reads it, so their summed results equal that process's.
TEST(SequentialSampler, RanksSplitEachGlobalBatch) {
  SequentialSampler whole(11, 4), r0(11, 2, 0, 2), r1(11, 2, 1, 2);
  EXPECT_EQ(r0.num_batches(), whole.num_batches());
  for (int64_t k = 0; k < whole.num_batches(); ++k) {
    Indices joined;
    for (auto* s : {&r0, &r1}) {
      auto b = s->batch(k);
      joined.insert(joined.end(), b.begin(), b.end());
    }
    auto w = whole.batch(k);
    EXPECT_EQ(joined, Indices(w.begin(), w.end())) << "batch " << k;
  }
  EXPECT_THROW(SequentialSampler(10, 2, 2, 2), ConfigError);
  EXPECT_THROW(SequentialSampler(10, 2, 0, 0), ConfigError);
}

// Sequential order: global step s takes samples [s*G, (s+1)*G), rank r the
// r-th B of them, whatever the seed; epochs repeat the same order.
TEST(DistributedSampler, SequentialOrderTakesConsecutiveSlicesPerRank) {
  const int64_t N = 23, B = 2;
  const int n = 3;
  for (uint64_t seed : {1u, 99u}) {
    std::vector<DistributedSampler> ranks;
    for (int r = 0; r < n; ++r) ranks.emplace_back(N, B, r, n, seed, SampleOrder::Sequential);
    for (int64_t step = 0; step < 7; ++step) {  // 3 steps per epoch (23 / 6): 7 crosses two epochs
      const int64_t s = step % (N / (n * B));
      for (int r = 0; r < n; ++r) {
        const auto idx = ranks[r].next();
        ASSERT_EQ(idx.size(), 2u);
        EXPECT_EQ(idx[0], s * n * B + r * B) << "step " << step << " rank " << r;
        EXPECT_EQ(idx[1], s * n * B + r * B + 1);
      }
    }
  }
  Indices perm;
  DistributedSampler::permutation(5, 3, 2, perm, SampleOrder::Sequential);
  EXPECT_EQ(perm, (Indices{0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace meshtrain
