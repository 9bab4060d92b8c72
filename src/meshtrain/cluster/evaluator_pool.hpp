#pragma once
// An evaluator replica (worker pool 3): watches a job's checkpoint directory
// and evaluates each new complete checkpoint on the validation data, the way
// `meshtrain eval` would (the checkpoint's own config, the command-line
// overrides on top, training.eval_batches batches), appending one JSON line
// per checkpoint to <training.out_dir>/eval.jsonl:
//   {"step": 100, "val_loss": 2.31, "val_accuracy": 0.42, "predictions": ..., "batches": ..., "checkpoint": "..."}
// With metrics.tensorboard, each evaluator also writes the numbers to its own
// TensorBoard event file in <training.out_dir>/tb (tags eval/loss, ...).
//
// Several evaluators share the work: each checkpoint is claimed by creating
// <training.out_dir>/.eval_claims/step_<S> exclusively, so every checkpoint
// is evaluated once and a restarted evaluator skips the ones already done.
// An evaluator returns once the final checkpoint (step == training.steps)
// has been evaluated by someone, or when `stop` becomes non-zero (after
// finishing the checkpoint in hand). Checkpoints pruned before they could be
// read are reported and skipped.
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain {

struct EvaluatorOptions {
  std::vector<std::string> overrides;           // applied to each checkpoint's config
  std::chrono::milliseconds poll{500};          // between looks at the directory
  const volatile std::sig_atomic_t* stop = nullptr;
  std::FILE* log = stdout;
};

// Returns the number of checkpoints this evaluator evaluated.
int64_t run_evaluator(const JobConfig& config, const EvaluatorOptions& options);

}  // namespace meshtrain
