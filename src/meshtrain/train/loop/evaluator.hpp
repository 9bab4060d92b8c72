#pragma once
// Validation: the mean loss and accuracy over the first batches of the
// validation split, the same batches every time, so evaluations compare.
#include <cstdint>

#include "meshtrain/core/batch.hpp"
#include "meshtrain/data/loader.hpp"
#include "meshtrain/nn/model.hpp"
#include "meshtrain/train/engine/micro_batches.hpp"

namespace meshtrain {

struct EvalResult {
  double loss = 0;      // mean over predictions
  double accuracy = 0;  // share of argmax == target
  int64_t predictions = 0;
  int64_t batches = 0;
  double loss_sum = 0;  // loss * predictions: what workers add up
  int64_t correct = 0;
};

// Evaluates up to max_batches validation batches (0: all): this rank's part
// of each, when the loader is one of several ranks. A forward pass only;
// gradients are untouched. Throws DataError if there is no batch.
// micro_batches > 1: each validation batch runs as that many micro-batches
// (a job with gradient accumulation never holds a whole batch's activations).
EvalResult evaluate(Model& model, DataLoader& loader, int64_t max_batches, Batch& scratch,
                    int64_t micro_batches = 1);
// The same through a step's micro-batch runner (a pipeline's forwards).
EvalResult evaluate(MicroBatchRunner& micro_batches, DataLoader& loader, int64_t max_batches, Batch& scratch);

// Several ranks' evaluations as one: takes the sums over ranks of their
// loss_sum, correct and predictions.
EvalResult combine_eval_sums(double loss_sum, double correct, double predictions, int64_t batches);

}  // namespace meshtrain
