#pragma once
// The lower layers' config structs, filled from a job config's sections.
#include "meshtrain/data/data_config.hpp"
#include "meshtrain/optim/config.hpp"
#include "meshtrain/optim/schedule.hpp"
#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain {

inline DataConfig to_data_config(const DataSection& d) {
  return DataConfig{.kind = d.kind, .path = d.path, .val_fraction = d.val_fraction, .seed = static_cast<uint64_t>(d.seed)};
}

inline OptimizerConfig to_optimizer_config(const OptimizerSection& o) {
  OptimizerConfig c;
  c.kind = o.name;
  c.lr = o.lr;
  c.weight_decay = o.weight_decay;
  c.beta1 = o.beta1;
  c.beta2 = o.beta2;
  c.eps = o.eps;
  c.momentum = o.momentum;
  c.nesterov = o.nesterov;
  c.trust_coefficient = o.trust_coefficient;
  return c;
}

inline ScheduleConfig to_schedule_config(const JobConfig& c) {
  return ScheduleConfig{.warmup_steps = c.schedule.warmup_steps, .decay = c.schedule.decay,
                        .total_steps = c.training.steps, .min_lr_ratio = c.schedule.min_lr_ratio};
}

// The batch optimizer.lr was tuned for: schedule.reference_batch, or the per-device batch.
inline int64_t reference_batch(const JobConfig& c) {
  return c.schedule.reference_batch > 0 ? c.schedule.reference_batch : c.training.batch_size;
}

// optimizer.lr after the scaling rule, for updates computed on `batch` samples.
inline double scaled_base_lr(const JobConfig& c, int64_t batch) {
  return effective_base_lr(c.optimizer.lr, batch, reference_batch(c), c.schedule.scale_rule);
}

// T for token data, 0 for images: what DataLoader::from_config takes.
inline int64_t data_seq_len(const JobConfig& c) { return c.data.kind == DataKind::Text ? c.model.block_size : 0; }

}  // namespace meshtrain
