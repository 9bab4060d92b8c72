#pragma once
// `meshtrain plan --emit-config FILE`: the planner's recommendation as a job
// config that `meshtrain run` accepts (plan to run in two commands).
//
// What the recommendation sets, and nothing else:
//   [parallel]  data, all_reduce, zero_stage, workers, tensor, pipeline,
//               expert, micro_batches (reducers for the Reduction Server;
//               a pipeline of another depth gets 1f1b over balanced stages,
//               no tensor ways turn sequence_parallel off)
//   [training]  batch_size: the planner's global batch over the data ways
//               (rounded up), run as parallel.micro_batches micro-batches of
//               at most the planner's micro-batch; recompute = "full" when
//               the strategy fits only with activation recomputation
// From a job config (`plan --config JOB.toml`) every other key stays as it
// is. Without one the job is complete and minimal: the plan's model (gpt or
// vit shape), the default data for it, its precision (training.precision =
// "bf16" for a mixed-precision plan, bf16 or fp16) and optimizer, and, when
// the plan knows them, its steps and the large-batch learning-rate rule
// (optimizer.lr = base_lr, schedule.scale_rule = linear,
// schedule.reference_batch).
#include <string>
#include <vector>

#include "meshtrain/plan/plan_keys.hpp"
#include "meshtrain/plan/plan_report.hpp"
#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain::cli {

struct EmittedJob {
  JobConfig config;
  std::string strategy;            // the recommendation's key
  std::vector<std::string> notes;  // where the job differs from what the planner assumed
};

// Throws ConfigError when there is nothing to run: no recommendation ("none"),
// a bare parameter count without a base job, or a layout the job config
// refuses (the validator's message, with the layout).
EmittedJob job_from_plan(const plan::Plan& plan, const JobConfig* base);

// The job's model, global batch (batch_size x data ways) and optimizer as
// plan keys, over whatever `values` holds for them (hardware and time keys
// stay), and its precision: fp32, or bf16 as the plan's mixed precision.
void add_job_to_plan(const JobConfig& job, const std::string& origin, plan::PlanValues& values);

// The file's text: a comment header (strategy, layout, notes, how to run
// it), then every key (job_config_to_toml).
std::string emitted_config_text(const EmittedJob& job, const std::string& path);

// Refuses (ConfigError) when `path` exists and !force.
void check_may_write(const std::string& path, bool force);
// Writes `text` to `path` atomically (a temporary file renamed over it).
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace meshtrain::cli
