#include "meshtrain/train/config/section_configs.hpp"

#include "meshtrain/train/config/config_schema.hpp"

namespace meshtrain {

StepSettings to_step_settings(const JobConfig& c, int data_ways) {
  StepSettings s{.optimizer = to_optimizer_config(c.optimizer),
                 .schedule = to_schedule_config(c),
                 .base_lr = scaled_base_lr(c, c.training.batch_size * data_ways),
                 .grad_clip = c.optimizer.grad_clip,
                 .micro_batches = c.parallel.micro_batches,
                 .zero_stage = data_ways > 1 ? static_cast<int>(c.parallel.zero_stage) : 0,
                 .bucket_bytes = static_cast<size_t>(c.parallel.bucket_mb * (1 << 20)),
                 .reduce_dtype = c.parallel.reduce_dtype};
  validate_schedule(s.schedule);
  return s;
}

CheckpointSettings to_checkpoint_settings(const JobConfig& c) {
  return {.root = c.checkpoint_dir(),
          .every = c.checkpoint.every,
          .keep = c.checkpoint.keep,
          .async = c.checkpoint.async,
          .timeout_s = c.parallel.timeout_s,
          .config_toml = job_config_to_toml(c)};
}

parallel::ContextSettings to_context_settings(const ParallelSection& p, const Device& device) {
  return {.data_parallel = p.data == DataParallelism::AllReduce,
          .data = enum_string(p.data),
          .all_reduce = p.all_reduce,
          .tensor = static_cast<int>(p.tensor),
          .pipeline = static_cast<int>(p.pipeline),
          .expert = static_cast<int>(p.expert),
          .sequence_parallel = p.sequence_parallel,
          .reduce_dtype = p.reduce_dtype,
          .transport = p.transport,
          .device_collectives = p.device_collectives,
          .timeout_s = p.timeout_s,
          .device = device};
}

}  // namespace meshtrain
