#include "meshtrain/train/loop/evaluator.hpp"

#include <algorithm>

#include "meshtrain/core/error.hpp"

namespace meshtrain {

EvalResult evaluate(Model& model, DataLoader& loader, int64_t max_batches, Batch& scratch, int64_t micro_batches) {
  int64_t available = loader.num_validation_batches();
  int64_t batches = max_batches > 0 ? std::min(max_batches, available) : available;
  if (batches == 0) throw DataError("the validation split is smaller than one batch");
  double loss_sum = 0;
  int64_t correct = 0, count = 0;
  Batch micro;  // a job with micro-batches never runs a whole batch at once
  for (int64_t k = 0; k < batches; ++k) {
    loader.validation_batch(k, scratch);
    const int64_t pieces = scratch.batch_size % micro_batches == 0 ? micro_batches : 1;
    for (int64_t m = 0; m < pieces; ++m) {
      const int64_t size = scratch.batch_size / pieces;
      if (pieces > 1) copy_samples(scratch, m * size, size, micro);
      ForwardResult r = model.forward(pieces > 1 ? micro : scratch);
      // Weight by predictions so batches of different sizes average correctly.
      loss_sum += static_cast<double>(r.loss) * r.count;
      correct += r.correct;
      count += r.count;
    }
  }
  return {loss_sum / count, static_cast<double>(correct) / count, count, batches, loss_sum, correct};
}

EvalResult combine_eval_sums(double loss_sum, double correct, double predictions, int64_t batches) {
  const auto count = static_cast<int64_t>(predictions);
  return {loss_sum / predictions, correct / predictions, count, batches, loss_sum, static_cast<int64_t>(correct)};
}

}  // namespace meshtrain
