#pragma once
// One optimizer step of a synchronous worker, alone or one of a data-parallel
// group: forward, backward with the gradient all-reduce overlapped (when
// there is a GradientSync) or ZeRO's gathers and reduce-scatters (when there
// is a ZeroEngine), the global batch's loss, clipping by global norm, a
// finiteness check, and the update at the schedule's lr.
//
// With micro_batches = M > 1 (gradient accumulation) the worker's batch runs
// as M equal micro-batches whose gradients add up: data parallelism's
// all-reduce runs once, during the last micro-batch's backward (DDP's
// no_sync before it); ZeRO stages 2 and 3 reduce-scatter each micro-batch
// into the gradient shard, adding. The sum is then divided by M, so the step
// is the one batch's (within rounding: the sums' order differs).
#include <cstdint>

#include "meshtrain/core/batch.hpp"
#include "meshtrain/nn/model.hpp"
#include "meshtrain/optim/optimizer.hpp"
#include "meshtrain/optim/schedule.hpp"
#include "meshtrain/parallel/data_parallel/gradient_sync.hpp"
#include "meshtrain/parallel/zero/zero_engine.hpp"
#include "meshtrain/train/engine/worker_group.hpp"

namespace meshtrain {

struct StepResult {
  float loss = 0;       // mean over the global batch
  float grad_norm = 0;  // before clipping
  double lr = 0;
  parallel::GradientSyncStats comm;  // zero without data parallelism
};

struct StepContext {
  Model& model;
  Optimizer& optimizer;
  parallel::GradientSync* sync = nullptr;  // null: one worker, or ZeRO stage 2/3
  parallel::ZeroEngine* zero = nullptr;    // null: ZeRO stage 0 (the optimizer owns the whole store)
  WorkerGroup& workers;
  const ScheduleConfig& schedule;
  double base_lr = 0;     // after the scaling rule
  double grad_clip = 0;   // max global norm; 0: none
  int64_t micro_batches = 1;
  Batch* micro_batch = nullptr;  // scratch for one micro-batch; needed when micro_batches > 1
};

// Step `step` (0-based: the optimizer has taken `step` steps) on `batch`.
// Throws Error when the loss or gradient is not finite.
StepResult run_train_step(const StepContext& ctx, const Batch& batch, int64_t step);

// The global gradient norm, after clipping the gradients to max_norm when
// max_norm > 0 (the norm returned is the one before clipping).
float gradient_norm(ParamStore& store, double max_norm);

}  // namespace meshtrain
