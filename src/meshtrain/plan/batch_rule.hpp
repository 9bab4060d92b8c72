#pragma once
// The large-batch rule of thumb (Goyal et al., 2017, "Accurate, Large
// Minibatch SGD"): when the global batch grows k times over the batch a
// learning rate was tuned at, multiply the rate by k and ramp up to it over
// the first 5 epochs (gradual warmup). Very large batches may need LAMB or
// LARS instead (You et al.).
#include <cstdint>

#include "meshtrain/plan/plan_input.hpp"

namespace meshtrain::plan {

struct LearningRateAdvice {
  bool available = false;    // base_lr and reference_batch were given
  double lr = 0;             // the scaled peak rate
  double scale = 0;          // global batch / reference batch
  int64_t warmup_steps = 0;  // 5 epochs; 0 when the epoch size is unknown
  bool suggest_layerwise = false;  // scale > 32: LAMB / LARS
};

LearningRateAdvice large_batch_advice(const PlanInput& input);

}  // namespace meshtrain::plan
