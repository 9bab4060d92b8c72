#include "meshtrain/train/engine/update_guard.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "meshtrain/core/error.hpp"

namespace meshtrain {
namespace {

TEST(StepRanges, ParsesStepsAndRanges) {
  const std::vector<StepRange> r = parse_step_ranges(" 1200-1250, 3000 ,7 - 9");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].first, 1200);
  EXPECT_EQ(r[0].last, 1250);
  EXPECT_EQ(r[1].first, 3000);
  EXPECT_EQ(r[1].last, 3000);
  EXPECT_EQ(r[2].first, 7);
  EXPECT_EQ(r[2].last, 9);
  EXPECT_TRUE(parse_step_ranges("").empty());
  EXPECT_TRUE(parse_step_ranges("  ").empty());
}

TEST(StepRanges, RejectsWhatIsNotARange) {
  for (const char* bad : {"0", "5-3", "a", "3-", "1,,2", "-4", "2.5"}) {
    try {
      parse_step_ranges(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("training.skip_steps"), std::string::npos) << e.what();
    }
  }
}

TEST(UpdateGuard, SkipsNamedSteps) {
  UpdateGuard guard("3-4, 10", 0, 128);
  std::vector<int64_t> skipped;
  for (int64_t s = 1; s <= 12; ++s)
    if (guard.skips_step(s)) skipped.push_back(s);
  EXPECT_EQ(skipped, (std::vector<int64_t>{3, 4, 10}));
}

TEST(SpikeWindow, FlagsALossFarAboveTheWindowOnlyOnceItIsFull) {
  UpdateGuard guard("", 6, 8);
  // Alternating 2.0 and 2.2: mean 2.1, sd 0.1, so the line is 2.7.
  for (int i = 0; i < 7; ++i) {
    EXPECT_FALSE(guard.skip_update(100.0, 1.0)) << "the window is not full yet (" << i << ")";
    guard.window().restore("");  // keep it empty: the big value must not enter
  }
  for (int i = 0; i < 8; ++i) EXPECT_FALSE(guard.skip_update(i % 2 ? 2.2 : 2.0, 1.0));
  EXPECT_FALSE(guard.skip_update(2.65, 1.0));
  EXPECT_TRUE(guard.skip_update(5.0, 1.0)) << "a loss 29 sigma above the mean";
  UpdateGuard norms("", 6, 4);
  for (double n : {1.0, 1.1, 1.0, 1.1}) EXPECT_FALSE(norms.skip_update(2.0 + n / 100, n));
  EXPECT_TRUE(norms.skip_update(2.0, 50.0)) << "a gradient norm spike alone";
}

TEST(SpikeWindow, OffWithSigmaZero) {
  UpdateGuard guard("", 0, 2);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(guard.skip_update(i == 4 ? 1e6 : 1.0, 1.0));
  EXPECT_TRUE(guard.window().serialize().empty());
}

TEST(SpikeWindow, NonFiniteValuesNeverEnter) {
  SpikeWindow w(6, 3);
  w.add(1.0, 1.0);
  w.add(NAN, 1.0);
  w.add(1.0, INFINITY);
  SpikeWindow copy(6, 3);
  copy.restore(w.serialize());
  EXPECT_EQ(copy.serialize(), w.serialize());
  EXPECT_EQ(w.serialize().find(' ', w.serialize().find(' ') + 1), std::string::npos) << "one pair: " << w.serialize();
}

TEST(SpikeWindow, SerializesExactlyAndDecidesTheSameAfterRestore) {
  SpikeWindow a(3, 5);
  const double values[] = {2.718281828459045, 2.7182818284590455, 3.0000000000000004, 2.9, 3.1};
  for (double v : values) a.add(v, v / 3);
  SpikeWindow b(3, 5);
  b.restore(a.serialize());
  EXPECT_EQ(b.serialize(), a.serialize());
  for (double probe : {3.2, 3.3, 3.35, 3.4, 3.5}) EXPECT_EQ(a.is_spike(probe, 0), b.is_spike(probe, 0)) << probe;
  SpikeWindow shorter(3, 2);  // resumed with a shorter window: the newest values stay
  shorter.restore(a.serialize());
  SpikeWindow tail(3, 2);
  tail.add(2.9, 2.9 / 3);
  tail.add(3.1, 3.1 / 3);
  EXPECT_EQ(shorter.serialize(), tail.serialize());
}

TEST(SpikeWindow, RejectsTextItDidNotWrite) {
  SpikeWindow w(6, 4);
  EXPECT_THROW(w.restore("0x1p+1 zz"), CheckpointError);
  EXPECT_THROW(w.restore("0x1p+1"), CheckpointError);
}

}  // namespace
}  // namespace meshtrain
