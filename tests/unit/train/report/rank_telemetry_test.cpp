#include "meshtrain/train/report/rank_telemetry.hpp"

#include <gtest/gtest.h>

namespace meshtrain {
namespace {

// One interval of `steps` steps of `step_ms` each (10 x 100 ms: a window of its own).
std::vector<RankInterval> busy(std::initializer_list<double> ms, double step_ms = 100, double steps = 10) {
  std::vector<RankInterval> out;
  for (double m : ms) out.push_back({.step_ms = step_ms, .busy_ms = m, .steps = steps});
  return out;
}

TEST(IntervalTimer, AveragesTheStepsPartsAndResets) {
  IntervalTimer t;
  t.add_step(0.010, 0.001, 0.002, 0.000);
  t.add_step(0.030, 0.001, 0.004, 0.010);
  const RankInterval r = t.take(12.5);
  EXPECT_DOUBLE_EQ(r.step_ms, 20);
  EXPECT_DOUBLE_EQ(r.data_ms, 1);
  EXPECT_DOUBLE_EQ(r.comm_ms, 3);
  EXPECT_DOUBLE_EQ(r.checkpoint_ms, 5);
  EXPECT_DOUBLE_EQ(r.busy_ms, 11);
  EXPECT_DOUBLE_EQ(r.peak_tracked_mb, 12.5);
  EXPECT_GT(r.rss_mb, 0);
  EXPECT_GE(r.peak_rss_mb, r.rss_mb);
  EXPECT_DOUBLE_EQ(t.take(0).step_ms, 0) << "reset";
  EXPECT_EQ(RankInterval::decode(r.encode()).encode(), r.encode());
}

TEST(StragglerWatch, FlagsARankSlowTwoIntervalsInARow) {
  StragglerWatch watch(1.5, 1.0);
  for (int warmup = 0; warmup < 2; ++warmup)
    EXPECT_TRUE(watch.assess(busy({40, 41, 500})).stragglers.empty()) << "the warm-up is not judged";
  StragglerReport a = watch.assess(busy({40, 41, 90}));
  EXPECT_TRUE(a.stragglers.empty()) << "one interval is not enough";
  EXPECT_DOUBLE_EQ(a.vs_fastest[2], 90.0 / 40);
  StragglerReport b = watch.assess(busy({40, 42, 80}));
  EXPECT_EQ(b.stragglers, std::vector<int>{2});
  EXPECT_EQ(b.new_stragglers, std::vector<int>{2});
  EXPECT_DOUBLE_EQ(b.vs_best[2], 1.0) << "80 ms is its best so far";
  StragglerReport c = watch.assess(busy({40, 40, 85}));
  EXPECT_EQ(c.stragglers, std::vector<int>{2});
  EXPECT_TRUE(c.new_stragglers.empty()) << "warned once";
  EXPECT_TRUE(watch.assess(busy({40, 40, 41})).stragglers.empty()) << "recovered";
}

TEST(StragglerWatch, IgnoresRatiosOfTinyTimes) {
  StragglerWatch watch(1.5, 1.0);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(watch.assess(busy({0.5, 1.2})).stragglers.empty());
}

TEST(StragglerWatch, JudgesShortIntervalsTogether) {
  // 2 ms steps, 10 per interval: 20 ms intervals, so a 500 ms window takes 25.
  StragglerWatch watch(1.5, 1.0, 500);
  for (int warmup = 0; warmup < 2; ++warmup) watch.assess(busy({1, 1}, 2));
  // A burst of scheduler noise: worker 0 three times slower for two intervals.
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(watch.assess(busy({3, 1}, 4)).new_stragglers.empty());
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(watch.assess(busy({1, 1}, 2)).stragglers.empty()) << "interval " << i;
  // Worker 1 slow for good: flagged when the second slow window closes.
  int flagged_at = -1;
  for (int i = 0; i < 60 && flagged_at < 0; ++i) {
    const StragglerReport r = watch.assess(busy({1, 2.5}, 3));
    if (!r.new_stragglers.empty()) {
      EXPECT_EQ(r.new_stragglers, std::vector<int>{1});
      EXPECT_NEAR(r.window_vs_fastest[1], 2.5, 1e-9);
      EXPECT_NEAR(r.window_busy_ms[1], 2.5, 1e-9);
      flagged_at = i;
    }
  }
  EXPECT_GE(flagged_at, 17) << "not before two windows of 500 ms";
  EXPECT_LE(flagged_at, 40);
}

TEST(RankRecord, ListsEveryWorker) {
  StragglerWatch watch;
  const auto ranks = busy({10, 20});
  nlohmann::json rec = {{"step", 30}, {"loss", 2.0}};
  add_rank_fields(rec, ranks, watch.assess(ranks));
  EXPECT_EQ(rec["loss"], 2.0);
  ASSERT_EQ(rec["ranks"].size(), 2u);
  EXPECT_EQ(rec["ranks"][1]["worker"], 1);
  EXPECT_DOUBLE_EQ(rec["ranks"][1]["slow_vs_fastest"].get<double>(), 2.0);
  EXPECT_TRUE(rec["stragglers"].empty());
}

}  // namespace
}  // namespace meshtrain
