#pragma once
// Validation: the mean loss and accuracy over the first batches of the
// validation split, the same batches every time, so evaluations compare.
#include <cstdint>

#include "meshtrain/core/batch.hpp"
#include "meshtrain/data/loader.hpp"
#include "meshtrain/nn/model.hpp"

namespace meshtrain {

struct EvalResult {
  double loss = 0;      // mean over predictions
  double accuracy = 0;  // share of argmax == target
  int64_t predictions = 0;
  int64_t batches = 0;
};

// Evaluates up to max_batches validation batches (0: all). A forward pass
// only; gradients are untouched. Throws DataError if there is no batch.
EvalResult evaluate(Model& model, DataLoader& loader, int64_t max_batches, Batch& scratch);

}  // namespace meshtrain
