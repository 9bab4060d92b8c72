#pragma once
// The job config resolved into the parts each piece of a job receives: the
// lower layers' config structs (data, optimizer, schedule) and train/'s own
// typed settings (the step engine's, the checkpoints'). Every conversion from
// a JobConfig is here, done once by the entry that owns the whole config (the
// trainer, a parameter-server role, the forecast, a command), so nothing
// below it sees the whole config or converts it again.
#include <cstddef>
#include <cstdint>
#include <string>

#include "meshtrain/data/data_config.hpp"
#include "meshtrain/data/loader.hpp"
#include "meshtrain/optim/config.hpp"
#include "meshtrain/optim/schedule.hpp"
#include "meshtrain/parallel/parallel_context.hpp"
#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain {

// What the step engine is built from and steps with (engine/step_machinery.hpp,
// engine/train_step.hpp, engine/memory_budget.hpp).
struct StepSettings {
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  double base_lr = 0;          // optimizer.lr after the scaling rule, for the global batch
  double grad_clip = 0;        // max global norm; 0: none
  int64_t micro_batches = 1;   // gradient accumulation
  int zero_stage = 0;          // 0 with one data-parallel way: nothing to shard
  size_t bucket_bytes = 0;     // the overlapped all-reduce's buckets
  Precision reduce_dtype = Precision::Fp32;  // parallel.reduce_dtype
};

// Where and how a job's checkpoints are written (loop/checkpoint_saver.hpp,
// loop/train_checkpoint.hpp).
struct CheckpointSettings {
  std::string root;         // checkpoint.dir, or <training.out_dir>/checkpoints
  int64_t every = 0;        // steps between checkpoints; 0: at the end only
  int64_t keep = 3;
  bool async = true;
  double timeout_s = 300;   // the lead's wait for every worker's shard
  std::string config_toml;  // the job config every checkpoint carries (job_config_to_toml)
};

// The job's data; token ids are checked against the GPT's vocabulary.
inline DataConfig to_data_config(const JobConfig& c) {
  const DataSection& d = c.data;
  return DataConfig{.kind = d.kind, .path = d.path, .val_fraction = d.val_fraction, .seed = static_cast<uint64_t>(d.seed),
                    .train_path = d.train_path, .val_path = d.val_path,
                    .vocab_size = c.model.kind == ModelKind::Gpt ? c.model.vocab_size : 0, .order = d.order,
                    .tokenizer = d.tokenizer};
}

// T for token data, 0 for images: what DataLoader::from_config takes.
inline int64_t data_seq_len(const JobConfig& c) {
  return c.data.kind == DataKind::Text || c.data.kind == DataKind::Tokens ? c.model.block_size : 0;
}

// The job's data as rank `rank` of `ranks` reads it, training.batch_size per batch.
inline DataLoader job_data_loader(const JobConfig& c, int rank, int ranks) {
  return DataLoader::from_config(to_data_config(c), data_seq_len(c), c.training.batch_size, rank, ranks);
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

// The step of a worker among `data_ways` data-parallel ways (one ZeRO shard
// each): the global batch is training.batch_size x data_ways.
StepSettings to_step_settings(const JobConfig& c, int data_ways);

// The job's checkpoints, with its config as TOML.
CheckpointSettings to_checkpoint_settings(const JobConfig& c);

// What the job's parallel context is built from (parallel/parallel_context.hpp).
parallel::ContextSettings to_context_settings(const ParallelSection& p, const Device& device = {});

}  // namespace meshtrain
