#pragma once
// One optimizer step of a synchronous worker, alone or one of a data-parallel
// (and tensor-parallel) group, in a straight line whatever the strategy:
// forward and backward of each micro-batch around the strategy's gradient
// reduction (gradient_reduction.hpp: nothing, the overlapped all-reduce, or
// ZeRO's gathers and reduce-scatters), the global batch's loss, the global
// gradient norm and clipping, a finiteness check, and the update at the
// schedule's lr.
//
// With micro_batches = M > 1 (gradient accumulation) the worker's batch runs
// as M equal micro-batches whose gradients add up: data parallelism's
// all-reduce runs once, during the last micro-batch's backward (DDP's
// no_sync before it); ZeRO stages 2 and 3 reduce-scatter each micro-batch
// into the gradient shard, adding. The sum is then divided by M, so the step
// is the one batch's (within rounding: the sums' order differs).
//
// The global norm counts every gradient element once: each rank's squares
// of what it holds, added over the data ranks when they hold shards (ZeRO-2
// and 3); under tensor parallelism split by placement (a replicated tensor
// counted once, a sharded one summed over the tensor ranks:
// parallel/tensor/gradient_squares.hpp); under pipeline parallelism added
// over the stages, the tied embedding's copy on the last stage left out;
// under expert parallelism the expert tensors' squares are summed over the
// expert group (each rank holds other experts), the dense ones' are not.
#include <cstdint>

#include "meshtrain/core/batch.hpp"
#include "meshtrain/nn/model.hpp"
#include "meshtrain/optim/optimizer.hpp"
#include "meshtrain/optim/schedule.hpp"
#include "meshtrain/parallel/data_parallel/gradient_sync.hpp"
#include "meshtrain/parallel/parallel_context.hpp"
#include "meshtrain/train/config/section_configs.hpp"
#include "meshtrain/train/engine/gradient_reduction.hpp"
#include "meshtrain/train/engine/micro_batches.hpp"
#include "meshtrain/train/engine/moe_balancing.hpp"
#include "meshtrain/train/engine/update_guard.hpp"

namespace meshtrain {

struct StepResult {
  float loss = 0;       // mean over the global batch
  float grad_norm = 0;  // before clipping
  double lr = 0;
  StepCommunication comm;  // zero without data parallelism
  std::vector<MoeLayerReport> moe;   // the mixture-of-experts layers' routing; empty for a dense model
  const char* skipped = nullptr;     // why the update was left out ("spike", "skip_steps"); null: applied
};

struct StepContext {
  Model& model;
  Optimizer& optimizer;
  GradientReduction& gradients;  // the strategy (step_machinery.hpp)
  parallel::ParallelContext& workers;
  const StepSettings& settings;  // schedule, base lr, clipping, micro-batches
  MicroBatchRunner& micro_batches;  // one after another, or through the pipeline (micro_batches.hpp)
  MoeBalancing* moe = nullptr;      // the MoE layers' balancing (moe_balancing.hpp); null: none
  UpdateGuard* guard = nullptr;     // spike skipping (update_guard.hpp); null: every update applied
};

// Step `step` (0-based: the optimizer has taken `step` steps) on `batch`.
// Throws DivergedError when the loss or gradient is not finite
// (divergence.hpp); leaves the update out when the guard calls the step a
// spike.
StepResult run_train_step(const StepContext& ctx, const Batch& batch, int64_t step);

// The global gradient norm, after clipping the gradients to max_norm when
// max_norm > 0 (the norm returned is the one before clipping).
float gradient_norm(ParamStore& store, double max_norm);

}  // namespace meshtrain
