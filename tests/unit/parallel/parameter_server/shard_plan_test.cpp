// Shards: whole views, contiguous, covering the store, about 1/P each; a
// shard store has the layout of its flat range.
#include <gtest/gtest.h>

#include "meshtrain/core/error.hpp"
#include "meshtrain/parallel/parameter_server/shard_plan.hpp"
#include "ps_test_util.hpp"

namespace meshtrain::parallel::ps {
namespace {

TEST(PsShardPlan, CoversTheStoreInWholeViews) {
  ParamStore s;
  testing::make_store(s);
  for (int P = 1; P <= 5; ++P) {
    auto shards = plan_shards(s, P);
    ASSERT_EQ(shards.size(), size_t(P));
    size_t view = 0, begin = 0;
    for (const auto& sh : shards) {
      EXPECT_EQ(sh.first_view, view) << P;
      EXPECT_GT(sh.end_view, sh.first_view) << P;
      EXPECT_EQ(sh.begin, begin) << P;
      EXPECT_EQ(sh.begin, s.view(sh.first_view).offset);
      view = sh.end_view;
      begin = sh.end;
    }
    EXPECT_EQ(view, s.views().size());
    EXPECT_EQ(begin, s.flat_size());
  }
}

TEST(PsShardPlan, BalancesEqualViews) {
  ParamStore s;
  for (char v = 0; v < 8; ++v) s.declare(std::string(1, char('a' + v)), {64}, true);
  s.allocate();
  for (int P : {1, 2, 4, 8}) {
    for (const auto& sh : plan_shards(s, P)) EXPECT_EQ(sh.end_view - sh.first_view, size_t(8 / P)) << P;
  }
  auto three = plan_shards(s, 3);  // 8 views over 3: 3, 2, 3 or similar, never 1 + 1 + 6
  for (const auto& sh : three) EXPECT_GE(sh.end_view - sh.first_view, 2u);
}

TEST(PsShardPlan, RefusesMoreServersThanTensors) {
  ParamStore s;
  testing::make_store(s);
  try {
    plan_shards(s, 6);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.servers"), std::string::npos) << e.what();
  }
  EXPECT_THROW(plan_shards(s, 0), ConfigError);
}

TEST(PsShardPlan, ShardStoreHasTheFlatRangesLayout) {
  ParamStore s;
  testing::make_store(s);
  for (const auto& sh : plan_shards(s, 3)) {
    auto shard = make_shard_store(s, sh);
    ASSERT_EQ(shard->flat_size(), sh.size());
    for (size_t v = sh.first_view; v < sh.end_view; ++v) {
      const ParamView& mine = shard->view(v - sh.first_view);
      EXPECT_EQ(mine.name, s.view(v).name);
      EXPECT_EQ(mine.offset + sh.begin, s.view(v).offset);
      EXPECT_EQ(mine.weight_decay, s.view(v).weight_decay);
    }
    EXPECT_TRUE(testing::bitwise_equal(shard->params().data(), s.params().data() + sh.begin, sh.size()));
  }
}

}  // namespace
}  // namespace meshtrain::parallel::ps
