#pragma once
// What a synchronous worker's step runs on, built from the config in the
// order each part needs: parameters made equal on every worker, then the
// gradient exchange (GradientSync for stages 0 and 1), the ZeRO engine
// (stages 1-3: it shards the store), the optimizer, over the whole store or
// the worker's shard, and last the strategy the step calls
// (gradient_reduction.hpp), the one place that tells the strategies apart.
#include <memory>

#include "meshtrain/nn/model.hpp"
#include "meshtrain/optim/optimizer.hpp"
#include "meshtrain/parallel/data_parallel/gradient_sync.hpp"
#include "meshtrain/parallel/parallel_context.hpp"
#include "meshtrain/parallel/zero/zero_engine.hpp"
#include "meshtrain/train/config/section_configs.hpp"
#include "meshtrain/train/engine/gradient_reduction.hpp"
#include "meshtrain/train/engine/micro_batches.hpp"

namespace meshtrain {

struct StepMachinery {
  std::unique_ptr<parallel::GradientSync> sync;  // null: one worker, or ZeRO stage 2/3
  std::unique_ptr<parallel::ZeroEngine> zero;    // null: stage 0, or one worker
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<GradientReduction> gradients;  // over the three above
  std::unique_ptr<MicroBatchRunner> micro_batches;  // how a batch runs through the model
};

// The model's parameters must be initialized (on the lead at least: the
// others receive the lead's). With one data-parallel way there is nothing to
// shard and settings.zero_stage is ignored.
StepMachinery make_step_machinery(const StepSettings& settings, const ParallelSection& parallel, Model& model,
                                  parallel::ParallelContext& workers);

}  // namespace meshtrain
