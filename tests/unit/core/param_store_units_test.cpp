// ParamStore's units, which ZeRO's split (parallel/zero/shard_layout.hpp)
// is built on: named units and whole-step runs tile the store; views can be
// pointed at other memory unit by unit; the flat buffers can be released.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "meshtrain/core/error.hpp"
#include "meshtrain/core/param_store.hpp"

namespace meshtrain {
namespace {

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

}  // namespace
}  // namespace meshtrain
