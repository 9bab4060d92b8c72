#pragma once
// How a step's micro-batches run through the model, for the step engine
// (train_step.hpp) and evaluation:
//
//   SequentialMicroBatches  one after another through the whole model
//                           (gradient accumulation; M = 1 is one batch)
//   PipelineMicroBatches    through the pipeline schedule over the stages
//                           (parallel/pipeline/executor.hpp): the loss on
//                           the last stage, shared with the others; the
//                           tied embedding's gradient summed between the
//                           first and the last stage after the reduction
//
// make_micro_batches picks one when the step is built, so the step is one
// straight line whatever the layout.
#include <cstdint>
#include <memory>
#include <vector>

#include "meshtrain/core/batch.hpp"
#include "meshtrain/nn/model.hpp"
#include "meshtrain/parallel/parallel_context.hpp"
#include "meshtrain/parallel/pipeline/executor.hpp"
#include "meshtrain/train/config/job_config.hpp"
#include "meshtrain/train/engine/gradient_reduction.hpp"

namespace meshtrain {

// A validation batch's forward: the loss weighted by predictions, so ranks
// and batches of different sizes add up.
struct EvalSums {
  double loss_sum = 0;
  int64_t correct = 0, predictions = 0;
};

class MicroBatchRunner {
 public:
  virtual ~MicroBatchRunner() = default;
  // Forwards and backwards of the worker's batch as M equal micro-batches,
  // their gradients added into the store, each bracketed for `gradients`
  // (gradient_reduction.hpp). Returns the sum over the micro-batches of each
  // one's mean loss, the same on every stage of a pipeline.
  virtual double train(const Batch& batch, GradientReduction& gradients) = 0;
  // After train(): the first micro-batch whose own loss on this rank was not
  // finite (-1: none; -2: one was, which is not known).
  virtual int64_t first_nonfinite_loss() const = 0;
  // After the gradients are reduced over the data ranks, before the norm,
  // on what the rank holds (the whole gradients, or its ZeRO shard).
  virtual void finish_gradients(const HeldGradients&) {}
  // Squares of the held gradients that another rank counts too (the tied
  // embedding's copy on the last stage), taken out of the global norm,
  // split by placement as gradient_squares.hpp counts them.
  virtual void duplicate_squares(const HeldGradients&, double& replicated, double& sharded) const {
    replicated = sharded = 0;
  }
  // Validation: one batch's forward as M micro-batches, added into `sums`
  // (the last stage's, on a pipeline); then shared() gives every stage the
  // sums of the whole evaluation.
  virtual void evaluate(const Batch& batch, EvalSums& sums) = 0;
  virtual EvalSums shared(const EvalSums& sums) { return sums; }
  // The pipeline's executor (its last step's spans, its slots); null
  // without a pipeline.
  virtual const parallel::pipeline::PipelineExecutor* pipeline() const { return nullptr; }
};

// One after another through the whole model, M = micro_batches.
std::unique_ptr<MicroBatchRunner> sequential_micro_batches(Model& model, int64_t micro_batches);
// The job's: through the pipeline when it has stages. M = micro_batches;
// the batch size must divide by M.
std::unique_ptr<MicroBatchRunner> make_micro_batches(const ParallelSection& parallel, Model& model,
                                                     parallel::ParallelContext& workers);

}  // namespace meshtrain
