#include "meshtrain/optim/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "meshtrain/core/error.hpp"

namespace meshtrain {

void validate_schedule(const ScheduleConfig& c) {
  const bool constant = c.decay == LrDecay::Constant;
  if (c.warmup_steps < 0)
    throw ConfigError("schedule.warmup_steps: must be >= 0, got " + std::to_string(c.warmup_steps));
  if (!constant && c.total_steps <= c.warmup_steps)
    throw ConfigError("schedule.total_steps: must exceed schedule.warmup_steps (" +
                      std::to_string(c.warmup_steps) + ") for " + enum_string(c.decay) + " decay, got " +
                      std::to_string(c.total_steps));
  if (!(c.min_lr_ratio >= 0 && c.min_lr_ratio <= 1))
    throw ConfigError("schedule.min_lr_ratio: must be in [0, 1], got " + std::to_string(c.min_lr_ratio));
}

double scheduled_lr(const ScheduleConfig& c, double base_lr, int64_t step) {
  step = std::max<int64_t>(step, 0);
  if (step < c.warmup_steps) return base_lr * double(step + 1) / double(c.warmup_steps);
  if (c.decay == LrDecay::Constant) return base_lr;
  const double min_lr = base_lr * c.min_lr_ratio;
  const double p = std::min(1.0, double(step - c.warmup_steps) / double(c.total_steps - c.warmup_steps));
  if (c.decay == LrDecay::Linear) return base_lr - (base_lr - min_lr) * p;
  return min_lr + (base_lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * p));
}

double effective_base_lr(double base_lr, int64_t global_batch, int64_t reference_batch, ScaleRule rule) {
  if (rule == ScaleRule::None) return base_lr;
  if (global_batch <= 0)
    throw ConfigError("global batch size must be > 0, got " + std::to_string(global_batch));
  if (reference_batch <= 0)
    throw ConfigError("schedule.reference_batch: must be > 0, got " + std::to_string(reference_batch));
  const double ratio = double(global_batch) / double(reference_batch);
  return rule == ScaleRule::Linear ? base_lr * ratio : base_lr * std::sqrt(ratio);
}

}  // namespace meshtrain
