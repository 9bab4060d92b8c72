#pragma once
// Per-rank memory: what ZeRO's formulas predict for a model and a stage,
// the check against training.max_memory_mb, and the report that sets the
// prediction beside what the MemoryTracker measured.
//
// Predicted model state, for Psi = the store's flat size (parameters plus
// the 64-byte alignment padding between tensors), N workers and K optimizer
// state floats per parameter (2 for AdamW and LAMB, 1 for SGD and LARS with
// momentum, 0 without), in bytes:
//   parameters   4 Psi       (stage 3: 4 Psi / N)
//   gradients    4 Psi       (stages 2, 3: 4 Psi / N)
//   optimizer    4 K Psi     (stages 1-3: 4 K Psi / N)
// where "/ N" is exactly the rank's shard: one padded slice per unit
// (parallel/zero/shard_layout.hpp). Communication buffers, documented in
// param_gatherer.hpp and grad_reducer.hpp, are predicted exactly too; the
// collectives' transient scratch is not tracked. Activations are measured;
// for a GPT outside a pipeline they are also set beside the formula the
// planner uses (core/activation_memory.hpp, without dropout), for the
// recomputation mode the job runs.
#include <cstddef>
#include <cstdio>
#include <string>

#include "meshtrain/core/device.hpp"
#include "meshtrain/core/memory.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/optim/config.hpp"
#include "meshtrain/train/config/job_config.hpp"
#include "meshtrain/train/config/section_configs.hpp"

namespace meshtrain {

struct MemoryPrediction {
  size_t parameters = 0, gradients = 0, optimizer_state = 0, communication = 0;
  size_t activations = 0;  // the formula's; 0: not predicted (not part of total())
  size_t model_state() const { return parameters + gradients + optimizer_state; }
  size_t total() const { return model_state() + communication; }
};

// Optimizer state floats per parameter for the optimizer and its settings.
int optimizer_state_floats(const OptimizerConfig& optimizer);

// Rank 0's prediction (the largest shard) at `stage` over `world` workers.
// micro_batches > 1 (gradient accumulation): stages 2 and 3 keep a second
// gradient shard for the later micro-batches' reduce-scatters (grad_reducer.hpp).
MemoryPrediction predict_memory(const ParamStore& store, int world, int stage, int state_floats,
                                int64_t micro_batches = 1);

// Throws ConfigError before training when max_memory_mb (training.max_memory_mb,
// > 0) is below the prediction for the step's settings on `world` workers,
// naming the smallest ZeRO stage that would fit (or saying that none does on
// this many workers).
void check_memory_budget(double max_memory_mb, const StepSettings& step, const ParamStore& store, int world);

// Throws Error when `tracker`'s peak (the job's device's, MemoryTracker::of)
// exceeds max_memory_mb (> 0; a step whose activations did not fit), naming
// the kinds.
void check_memory_peak(double max_memory_mb, int64_t step, const MemoryTracker& tracker);

// The formula's activation bytes of one rank for the job of these sections
// (a GPT on one pipeline stage without experts or sequence parallelism; 0
// otherwise): the model's shape, how the parallel layout splits the batch
// and the width, and how training keeps activations (batch, precision,
// recomputation, attention kernel).
size_t predict_activations(const ModelSection& model, const ParallelSection& parallel,
                           const TrainingSection& training);

// A table of tracked peak bytes per kind beside the prediction, for
// --memory-report and the end of a run: the memory of the job's device
// (MemoryTracker::of), and off the CPU the host's total below it.
std::string memory_report(const MemoryPrediction& predicted, int world, int stage, const Device& device);

}  // namespace meshtrain
