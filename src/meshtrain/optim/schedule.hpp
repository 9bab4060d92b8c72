#pragma once
// Learning-rate schedule and batch-size scaling of the base rate.
//
// Terms: step counts from 0; warmup covers steps [0, warmup_steps); decay
// runs from step warmup_steps (lr = base) to step total_steps (lr = base *
// min_lr_ratio) and stays there after. progress p = (step - warmup) /
// (total - warmup), clamped to [0, 1].
//   warmup:   lr = base * (step + 1) / warmup_steps
//   cosine:   lr = min + (base - min) * (1 + cos(pi * p)) / 2
//   linear:   lr = base - (base - min) * p
//   constant: lr = base (total_steps unused)
#include <cstdint>
#include <span>

#include "meshtrain/core/enum_names.hpp"

namespace meshtrain {

enum class LrDecay { Cosine, Linear, Constant };
inline constexpr EnumName<LrDecay> kLrDecayNames[] = {
    {LrDecay::Cosine, "cosine"}, {LrDecay::Linear, "linear"}, {LrDecay::Constant, "constant"}};
constexpr std::span<const EnumName<LrDecay>> enum_names(LrDecay) { return kLrDecayNames; }

// How the base lr follows the global batch (effective_base_lr below).
enum class ScaleRule { None, Linear, Sqrt };
inline constexpr EnumName<ScaleRule> kScaleRuleNames[] = {
    {ScaleRule::None, "none"}, {ScaleRule::Linear, "linear"}, {ScaleRule::Sqrt, "sqrt"}};
constexpr std::span<const EnumName<ScaleRule>> enum_names(ScaleRule) { return kScaleRuleNames; }

struct ScheduleConfig {
  int64_t warmup_steps = 0;
  LrDecay decay = LrDecay::Cosine;
  int64_t total_steps = 0;       // must exceed warmup_steps unless decay is Constant
  double min_lr_ratio = 0.0;     // in [0, 1]
};

// Throws ConfigError naming the key, e.g. "schedule.warmup_steps: must be >= 0, got -1".
void validate_schedule(const ScheduleConfig& config);

// The learning rate at step (0-based; negative steps count as 0). Expects a
// validated config.
double scheduled_lr(const ScheduleConfig& config, double base_lr, int64_t step);

// The linear scaling rule (Goyal et al., 2017) and its square-root variant:
//   None: base;  Linear: base * global / reference;  Sqrt: base * sqrt(global / reference).
// Throws ConfigError for a batch <= 0.
double effective_base_lr(double base_lr, int64_t global_batch, int64_t reference_batch, ScaleRule rule);

}  // namespace meshtrain
