// ZeRO's split of a ParamStore (ShardLayout): ranks' owned segments tile
// each unit, slices are aligned and packed into the shard buffers. (The
// store's units it is built on: tests/unit/core/param_store_units_test.cpp;
// a GPT's: tests/unit/nn/gpt_units_test.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "meshtrain/core/error.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/nn/gpt.hpp"
#include "meshtrain/parallel/zero/shard_layout.hpp"

namespace meshtrain::parallel {
namespace {

constexpr size_t kAlign = ParamStore::kAlignElems;

// Units (padded sizes): [a, b] whole-step 144 = 16*9; blk0 1232 = 16*77;
// [mid] whole-step 16 (smaller than one slice for any world > 1); blk1
// 4144 = 16*7*37; [head, head.b] whole-step 320 = 16*20.
void declare_store(ParamStore& s) {
  s.declare("a", {37}, false);
  s.declare("b", {7, 13}, true);
  s.begin_unit("blk0");
  s.declare("blk0.w", {30, 40}, true);
  s.declare("blk0.b", {30}, false);
  s.end_unit();
  s.declare("mid", {3}, true);
  s.begin_unit("blk1");
  s.declare("blk1.w", {4099}, true);
  s.declare("blk1.ln", {19}, false);
  s.end_unit();
  s.declare("head", {301}, true);
  s.declare("head.b", {1}, false);
  s.allocate();
}

// ----- ShardLayout --------------------------------------------------------------

TEST(ShardLayout, SlicesTileEveryUnitForWorldsOneToFive) {
  ParamStore s;
  declare_store(s);
  const auto& units = s.units();
  for (int world = 1; world <= 5; ++world) {
    SCOPED_TRACE("world " + std::to_string(world));
    const size_t n = size_t(world);
    std::vector<std::pair<size_t, size_t>> owned;  // every rank's owned segments
    for (int rank = 0; rank < world; ++rank) {
      SCOPED_TRACE("rank " + std::to_string(rank));
      const ShardLayout layout(s, rank, world);
      EXPECT_EQ(layout.rank(), rank);
      EXPECT_EQ(layout.world(), world);
      ASSERT_EQ(layout.units().size(), units.size());
      size_t local = 0, whole_step_gathered = 0, most_whole = 0, most_other = 0;
      FlatSegments segments;
      for (size_t u = 0; u < units.size(); ++u) {
        const UnitShard& sh = layout.unit(u);
        EXPECT_EQ(sh.unit, u);
        EXPECT_EQ(sh.begin, units[u].begin);
        EXPECT_EQ(sh.end, units[u].end);
        EXPECT_EQ(sh.elements(), units[u].size());
        EXPECT_EQ(sh.whole_step, units[u].whole_step);
        // The slice: the smallest multiple of 16 with world * slice >= the unit's size.
        EXPECT_EQ(sh.slice % kAlign, 0u) << units[u].name;
        EXPECT_GE(sh.slice * n, sh.elements()) << units[u].name;
        EXPECT_LT((sh.slice - kAlign) * n, sh.elements()) << units[u].name;
        EXPECT_EQ(layout.gathered_size(sh), sh.slice * n);
        // Local offsets are the prefix sums of the slices.
        EXPECT_EQ(sh.local, local) << units[u].name;
        local += sh.slice;
        // Rank r owns [begin + r * slice, begin + (r + 1) * slice), cut at the unit's end.
        const size_t lo = std::min(sh.end, sh.begin + size_t(rank) * sh.slice);
        const size_t hi = std::min(sh.end, sh.begin + size_t(rank + 1) * sh.slice);
        EXPECT_EQ(sh.owned.begin, lo) << units[u].name;
        EXPECT_EQ(sh.owned.end, hi) << units[u].name;
        EXPECT_EQ(sh.owned.local, sh.local) << units[u].name;
        EXPECT_LE(sh.owned.size(), sh.slice);
        if (hi > lo) {
          segments.push_back(sh.owned);
          owned.emplace_back(lo, hi);
        }
        if (sh.whole_step) whole_step_gathered += sh.slice * n, most_whole = std::max(most_whole, sh.slice * n);
        else most_other = std::max(most_other, sh.slice * n);
      }
      EXPECT_EQ(layout.local_size(), local);
      // Within one slice per unit of flat_size / world: flat <= world * local < flat + 16 * world * units.
      EXPECT_GE(layout.local_size() * n, s.flat_size());
      EXPECT_LT(layout.local_size() * n, s.flat_size() + kAlign * n * units.size());
      // segments() is the non-empty owned ranges, in flat order.
      ASSERT_EQ(layout.segments().size(), segments.size());
      for (size_t i = 0; i < segments.size(); ++i) {
        EXPECT_EQ(layout.segments()[i].begin, segments[i].begin) << i;
        EXPECT_EQ(layout.segments()[i].end, segments[i].end) << i;
        EXPECT_EQ(layout.segments()[i].local, segments[i].local) << i;
      }
      EXPECT_EQ(layout.whole_step_gathered_size(), whole_step_gathered);
      EXPECT_EQ(layout.max_gathered_size(true), most_whole);
      EXPECT_EQ(layout.max_gathered_size(false), most_other);
    }
    // Over all ranks the owned segments are disjoint and cover [0, flat_size) exactly.
    std::sort(owned.begin(), owned.end());
    size_t covered = 0;
    for (const auto& [lo, hi] : owned) {
      EXPECT_EQ(lo, covered) << "gap or overlap at " << std::min(lo, covered);
      covered = hi;
    }
    EXPECT_EQ(covered, s.flat_size());
  }
}

TEST(ShardLayout, HandValuesForThreeRanks) {
  ParamStore s;
  declare_store(s);
  // blk0 (1232 elements from 144): slice = ceil(1232 / 3) = 411 -> 416.
  const ShardLayout r2(s, 2, 3);
  EXPECT_EQ(r2.unit(1).slice, 416u);
  EXPECT_EQ(r2.unit(1).owned.begin, 144u + 832);
  EXPECT_EQ(r2.unit(1).owned.end, 144u + 1232);  // 400 elements, 16 of padding in the slice
  // [mid] (16 elements): slice 16, rank 0 owns it all, ranks 1 and 2 nothing.
  EXPECT_EQ(r2.unit(2).slice, 16u);
  EXPECT_EQ(r2.unit(2).owned.size(), 0u);
  EXPECT_EQ(ShardLayout(s, 0, 3).unit(2).owned.size(), 16u);
  // Slices: 48 (144/3), 416, 16, 1392 (4144/3 = 1381.3 -> 1392), 112 (320/3 = 106.7 -> 112).
  EXPECT_EQ(r2.local_size(), 48u + 416 + 16 + 1392 + 112);
  EXPECT_EQ(r2.segments().size(), 4u);  // every unit but [mid]
  EXPECT_EQ(r2.whole_step_gathered_size(), 3u * (48 + 16 + 112));
  EXPECT_EQ(r2.max_gathered_size(false), 3u * 1392);
}

TEST(ShardLayout, RankOutsideTheWorldThrows) {
  ParamStore s;
  declare_store(s);
  EXPECT_THROW(ShardLayout(s, -1, 2), Error);
  EXPECT_THROW(ShardLayout(s, 2, 2), Error);
  EXPECT_THROW(ShardLayout(s, 0, 0), Error);
  EXPECT_THROW(ShardLayout(s, 0, -3), Error);
  EXPECT_NO_THROW(ShardLayout(s, 1, 2));
}

// A GPT sharded over 4 ranks: the whole-step units (embeddings, final norm)
// are gathered together for the whole step; the blocks are equal.
TEST(ShardLayout, GptWholeStepUnitsAndEqualBlocks) {
  Gpt gpt(GptConfig{.n_layer = 3, .n_embd = 16, .n_head = 2, .block_size = 8, .vocab_size = 64});
  const ShardLayout layout(gpt.store(), 3, 4);
  ASSERT_EQ(layout.units().size(), 5u);
  EXPECT_EQ(layout.whole_step_gathered_size(),
            layout.gathered_size(layout.unit(0)) + layout.gathered_size(layout.unit(4)));
  for (size_t b = 1; b <= 3; ++b) {
    EXPECT_EQ(layout.gathered_size(layout.unit(b)), layout.gathered_size(layout.unit(1))) << b;
    EXPECT_EQ(layout.unit(b).block_ordinal, b - 1);
  }
  EXPECT_EQ(layout.max_gathered_size(false), layout.gathered_size(layout.unit(1)));
}

}  // namespace
}  // namespace meshtrain::parallel
