// LR schedule at its key steps, and the batch-size scaling rule.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "meshtrain/core/error.hpp"
#include "meshtrain/optim/schedule.hpp"

namespace meshtrain {
namespace {

ScheduleConfig config(LrDecay decay) {
  ScheduleConfig c;
  c.warmup_steps = 10;
  c.decay = decay;
  c.total_steps = 110;
  c.min_lr_ratio = 0.1;
  validate_schedule(c);
  return c;
}

TEST(Schedule, WarmupIsLinearFromBaseOverWarmup) {
  for (const LrDecay decay : {LrDecay::Cosine, LrDecay::Linear, LrDecay::Constant}) {
    const ScheduleConfig c = config(decay);
    EXPECT_DOUBLE_EQ(scheduled_lr(c, 1.0, 0), 0.1) << enum_name(decay);
    EXPECT_DOUBLE_EQ(scheduled_lr(c, 1.0, 4), 0.5) << enum_name(decay);
    EXPECT_DOUBLE_EQ(scheduled_lr(c, 1.0, 9), 1.0) << enum_name(decay);   // warmup - 1
    EXPECT_DOUBLE_EQ(scheduled_lr(c, 1.0, 10), 1.0) << enum_name(decay);  // warmup
  }
}

TEST(Schedule, CosineKeySteps) {
  const ScheduleConfig c = config(LrDecay::Cosine);
  const double base = 3e-4, min = 3e-5;
  EXPECT_DOUBLE_EQ(scheduled_lr(c, base, 60), (base + min) / 2);  // mid
  EXPECT_DOUBLE_EQ(scheduled_lr(c, base, 35),
                   min + (base - min) * 0.5 * (1 + std::cos(std::numbers::pi * 0.25)));
  EXPECT_NEAR(scheduled_lr(c, base, 110), min, 1e-18);  // end
  EXPECT_NEAR(scheduled_lr(c, base, 500), min, 1e-18);  // past the end
}

TEST(Schedule, LinearKeySteps) {
  const ScheduleConfig c = config(LrDecay::Linear);
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 1.0, 60), 0.55);  // mid
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 1.0, 35), 1.0 - 0.9 * 0.25);
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 1.0, 110), 0.1);  // end
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 1.0, 111), 0.1);
}

TEST(Schedule, ConstantAndNoWarmup) {
  ScheduleConfig c;
  c.decay = LrDecay::Constant;
  validate_schedule(c);
  EXPECT_EQ(scheduled_lr(c, 0.5, 0), 0.5);
  EXPECT_EQ(scheduled_lr(c, 0.5, 1000000), 0.5);
  c.decay = LrDecay::Cosine;
  c.total_steps = 100;
  EXPECT_EQ(scheduled_lr(c, 0.5, 0), 0.5);  // no warmup starts at base
}

TEST(Schedule, InvalidConfigsNameTheKey) {
  auto message = [](ScheduleConfig c) {
    try {
      validate_schedule(c);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  ScheduleConfig c = config(LrDecay::Cosine);
  c.total_steps = 10;
  EXPECT_EQ(message(c), "schedule.total_steps: must exceed schedule.warmup_steps (10) for cosine decay, got 10");
  c = config(LrDecay::Linear);
  c.warmup_steps = -1;
  EXPECT_EQ(message(c).rfind("schedule.warmup_steps:", 0), 0u);
  c = config(LrDecay::Linear);
  c.min_lr_ratio = 1.5;
  EXPECT_EQ(message(c).rfind("schedule.min_lr_ratio:", 0), 0u);
}

TEST(ScalingRule, LinearSqrtNone) {
  EXPECT_DOUBLE_EQ(effective_base_lr(0.1, 1024, 256, ScaleRule::Linear), 0.4);
  EXPECT_DOUBLE_EQ(effective_base_lr(0.1, 1024, 256, ScaleRule::Sqrt), 0.2);
  EXPECT_DOUBLE_EQ(effective_base_lr(0.1, 1024, 256, ScaleRule::None), 0.1);
  EXPECT_DOUBLE_EQ(effective_base_lr(0.1, 128, 256, ScaleRule::Linear), 0.05);
  EXPECT_THROW(effective_base_lr(0.1, 1024, 0, ScaleRule::Linear), ConfigError);
}

}  // namespace
}  // namespace meshtrain
