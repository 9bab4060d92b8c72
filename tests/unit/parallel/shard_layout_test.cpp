// ZeRO's split of a ParamStore (ShardLayout) and the store's units it is
// built on: units tile the store, ranks' owned segments tile each unit,
// slices are aligned and packed into the shard buffers; views can be
// pointed at other memory unit by unit; a GPT's units are its embeddings,
// blocks and final norm.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
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

// ----- ParamStore units ---------------------------------------------------------

TEST(ParamStoreUnits, NamedUnitsAndWholeStepRunsTileTheStore) {
  ParamStore s;
  declare_store(s);
  // name, first_view, end_view, begin, end, whole_step
  const std::vector<std::tuple<std::string, size_t, size_t, size_t, size_t, bool>> want = {
      {"a", 0, 2, 0, 144, true},
      {"blk0", 2, 4, 144, 144 + 1232, false},
      {"mid", 4, 5, 1376, 1392, true},
      {"blk1", 5, 7, 1392, 1392 + 4144, false},
      {"head", 7, 9, 5536, 5536 + 320, true},
  };
  ASSERT_EQ(s.units().size(), want.size());
  for (size_t u = 0; u < want.size(); ++u) {
    const ParamUnit& unit = s.units()[u];
    const auto& [name, first_view, end_view, begin, end, whole_step] = want[u];
    EXPECT_EQ(unit.name, name) << u;
    EXPECT_EQ(unit.first_view, first_view) << name;
    EXPECT_EQ(unit.end_view, end_view) << name;
    EXPECT_EQ(unit.begin, begin) << name;
    EXPECT_EQ(unit.end, end) << name;
    EXPECT_EQ(unit.size(), end - begin) << name;
    EXPECT_EQ(unit.whole_step, whole_step) << name;
    // Its range starts at its first view and ends at the next unit's start.
    EXPECT_EQ(unit.begin, s.view(unit.first_view).offset) << name;
    EXPECT_EQ(unit.end, u + 1 < want.size() ? s.units()[u + 1].begin : s.flat_size()) << name;
    for (size_t v = unit.first_view; v < unit.end_view; ++v) EXPECT_EQ(s.unit_of_view(v), u) << s.view(v).name;
  }
  EXPECT_EQ(s.flat_size(), 5856u);
}

TEST(ParamStoreUnits, BeginUnitReturnsItsIndex) {
  ParamStore s;
  EXPECT_EQ(s.begin_unit("first"), 0u);
  s.declare("x", {3}, true);
  s.end_unit();
  s.declare("y", {3}, true);  // unit 1, whole-step
  EXPECT_EQ(s.begin_unit("second"), 2u);
  s.declare("z", {3}, true);
  s.end_unit();
  s.allocate();
  ASSERT_EQ(s.units().size(), 3u);
  EXPECT_FALSE(s.units()[0].whole_step);
  EXPECT_TRUE(s.units()[1].whole_step);
  EXPECT_EQ(s.units()[1].name, "y");
  EXPECT_EQ(s.units()[2].name, "second");
}

TEST(ParamStoreUnits, MisuseThrows) {
  ParamStore s;
  EXPECT_THROW(s.end_unit(), Error);
  s.begin_unit("blk");
  EXPECT_THROW(s.begin_unit("nested"), Error);
  s.declare("w", {4}, true);
  EXPECT_THROW(s.allocate(), Error);  // inside a unit
  s.end_unit();
  s.allocate();
  EXPECT_THROW(s.begin_unit("late"), Error);
}

TEST(ParamStoreUnits, BindPointsAUnitsViewsAtOtherMemory) {
  ParamStore s;
  declare_store(s);
  const ParamUnit& blk1 = s.units()[3];
  ASSERT_EQ(blk1.name, "blk1");
  std::vector<float> gathered(blk1.size()), staging(blk1.size());
  for (size_t i = 0; i < gathered.size(); ++i) gathered[i] = float(i);
  s.bind_unit_params(3, gathered.data());
  s.bind_unit_grads(3, staging.data());
  for (size_t v = 0; v < s.views().size(); ++v) {
    const ParamView& view = s.view(v);
    if (s.unit_of_view(v) == 3) {
      EXPECT_EQ(s.param(v), gathered.data() + (view.offset - blk1.begin)) << view.name;
      EXPECT_EQ(s.grad(v), staging.data() + (view.offset - blk1.begin)) << view.name;
    } else {  // other units still read the flat buffers
      EXPECT_EQ(s.param(v), s.params().data() + view.offset) << view.name;
      EXPECT_EQ(s.grad(v), s.grads().data() + view.offset) << view.name;
    }
  }
  // blk1.ln starts 4112 elements into the unit: param(6)[0] is gathered[4112].
  EXPECT_EQ(s.param(6)[0], 4112.0f);
  s.bind_unit_params(3, nullptr);
  EXPECT_EQ(s.param(5), nullptr);
  EXPECT_EQ(s.param(6), nullptr);
  EXPECT_EQ(s.grad(5), staging.data());
  EXPECT_THROW(s.bind_unit_params(5, gathered.data()), std::out_of_range);
}

// claim_zeroed_grad: true once per zeroing, for a zero_grads() or a bind
// its caller says it zeroed; never for an unzeroed bind or after release.
TEST(ParamStoreUnits, ZeroedGradientIsClaimedOncePerZeroing) {
  ParamStore s;
  declare_store(s);
  EXPECT_FALSE(s.claim_zeroed_grad(5));  // allocate() zeroes, but nothing said so
  s.zero_grads();
  EXPECT_TRUE(s.claim_zeroed_grad(5));
  EXPECT_FALSE(s.claim_zeroed_grad(5));
  EXPECT_TRUE(s.claim_zeroed_grad(6));
  std::vector<float> staging(s.units()[3].size());
  s.bind_unit_grads(3, staging.data());
  EXPECT_FALSE(s.claim_zeroed_grad(5));
  s.bind_unit_grads(3, staging.data(), /*zeroed=*/true);
  EXPECT_TRUE(s.claim_zeroed_grad(5));
  s.bind_unit_grads(3, nullptr, /*zeroed=*/true);  // detached: nothing to write
  EXPECT_FALSE(s.claim_zeroed_grad(6));
  s.zero_grads();
  s.release_flat_grads();
  EXPECT_FALSE(s.claim_zeroed_grad(0));
}

TEST(ParamStoreUnits, ReleaseFlatBuffersDetachesEveryView) {
  ParamStore s;
  declare_store(s);
  const size_t flat = s.flat_size();
  s.release_flat_params();
  EXPECT_TRUE(s.params().empty());
  EXPECT_EQ(s.grads().size(), flat);
  for (size_t v = 0; v < s.views().size(); ++v) {
    EXPECT_EQ(s.param(v), nullptr) << s.view(v).name;
    EXPECT_EQ(s.grad(v), s.grads().data() + s.view(v).offset) << s.view(v).name;
  }
  EXPECT_EQ(s.flat_size(), flat);  // the layout stays
  std::vector<float> unit0(s.units()[0].size());
  s.bind_unit_params(0, unit0.data());
  EXPECT_EQ(s.param(1), unit0.data() + s.view(1).offset);
  s.release_flat_grads();
  EXPECT_TRUE(s.grads().empty());
  for (size_t v = 0; v < s.views().size(); ++v) EXPECT_EQ(s.grad(v), nullptr) << s.view(v).name;
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

// ----- GPT's units --------------------------------------------------------------

TEST(GptUnits, EmbeddingsBlocksAndFinalNorm) {
  Gpt gpt(GptConfig{.n_layer = 3, .n_embd = 16, .n_head = 2, .block_size = 8, .vocab_size = 64});
  const ParamStore& s = gpt.store();
  const auto& units = s.units();
  ASSERT_EQ(units.size(), 5u);
  // [wte, wpe], whole-step.
  EXPECT_TRUE(units[0].whole_step);
  ASSERT_EQ(units[0].end_view - units[0].first_view, 2u);
  EXPECT_EQ(s.view(units[0].first_view).name, "wte.weight");
  EXPECT_EQ(s.view(units[0].first_view + 1).name, "wpe.weight");
  // h.0 .. h.2: one unit each, 12 tensors, all named under the block.
  for (size_t b = 0; b < 3; ++b) {
    const ParamUnit& u = units[1 + b];
    const std::string prefix = "h." + std::to_string(b) + ".";
    EXPECT_EQ(u.name, "h." + std::to_string(b));
    EXPECT_FALSE(u.whole_step) << u.name;
    EXPECT_EQ(u.end_view - u.first_view, 12u) << u.name;
    for (size_t v = u.first_view; v < u.end_view; ++v)
      EXPECT_EQ(s.view(v).name.rfind(prefix, 0), 0u) << s.view(v).name << " in " << u.name;
  }
  // [ln_f.weight, ln_f.bias], whole-step.
  EXPECT_TRUE(units[4].whole_step);
  ASSERT_EQ(units[4].end_view - units[4].first_view, 2u);
  EXPECT_EQ(s.view(units[4].first_view).name, "ln_f.weight");
  EXPECT_EQ(s.view(units[4].first_view + 1).name, "ln_f.bias");
  EXPECT_EQ(units[4].end_view, s.views().size());
  // They tile the store.
  EXPECT_EQ(units[0].begin, 0u);
  for (size_t u = 0; u + 1 < units.size(); ++u) EXPECT_EQ(units[u].end, units[u + 1].begin);
  EXPECT_EQ(units.back().end, s.flat_size());
  // Sharded over 4 ranks: the whole-step units are gathered for the whole step.
  const ShardLayout layout(s, 3, 4);
  EXPECT_EQ(layout.whole_step_gathered_size(), layout.gathered_size(layout.unit(0)) + layout.gathered_size(layout.unit(4)));
  EXPECT_EQ(layout.max_gathered_size(false), layout.gathered_size(layout.unit(1)));  // blocks are equal
}

class Recorder final : public UnitObserver {
 public:
  void before_unit(size_t unit, UnitPass pass) override { events.emplace_back(unit, pass, true); }
  void after_unit(size_t unit, UnitPass pass) override { events.emplace_back(unit, pass, false); }
  std::vector<std::tuple<size_t, UnitPass, bool>> events;  // unit, pass, before?
};

TEST(GptUnits, BlocksAnnounceTheirForwardAndBackward) {
  Gpt gpt(GptConfig{.n_layer = 3, .n_embd = 16, .n_head = 2, .block_size = 8, .vocab_size = 64});
  Rng rng(7);
  gpt.init_parameters(rng);
  Batch batch;
  batch.batch_size = 2;
  batch.seq_len = 8;
  batch.tokens.ensure(16);
  batch.targets.ensure(16);
  for (int i = 0; i < 16; ++i) batch.tokens[i] = (i * 5) % 64, batch.targets[i] = (i * 5 + 5) % 64;
  Recorder rec;
  gpt.store().set_unit_observer(&rec);
  gpt.forward(batch);
  gpt.backward();
  gpt.store().set_unit_observer(nullptr);
  using E = std::tuple<size_t, UnitPass, bool>;
  const auto F = UnitPass::Forward, B = UnitPass::Backward;
  const std::vector<E> want = {E{1, F, true}, E{1, F, false}, E{2, F, true}, E{2, F, false}, E{3, F, true},
                               E{3, F, false}, E{3, B, true}, E{3, B, false}, E{2, B, true}, E{2, B, false},
                               E{1, B, true}, E{1, B, false}};
  EXPECT_EQ(rec.events, want);
}

}  // namespace
}  // namespace meshtrain::parallel
