#include "meshtrain/plan/batch_rule.hpp"

#include <cmath>

#include "meshtrain/optim/schedule.hpp"

namespace meshtrain::plan {

LearningRateAdvice large_batch_advice(const PlanInput& in) {
  LearningRateAdvice a;
  if (in.base_lr <= 0 || in.reference_batch <= 0) return a;
  a.available = true;
  a.lr = effective_base_lr(in.base_lr, in.global_batch, in.reference_batch, ScaleRule::Linear);
  a.scale = double(in.global_batch) / double(in.reference_batch);
  if (in.samples_per_epoch > 0) a.warmup_steps = int64_t(std::ceil(5 * in.samples_per_epoch / double(in.global_batch)));
  // Goyal et al. reach 8k images (32x their 256) with SGD; beyond that,
  // layer-wise rates (LARS, LAMB) keep large batches stable.
  a.suggest_layerwise = a.scale > 32;
  return a;
}

}  // namespace meshtrain::plan
