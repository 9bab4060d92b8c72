#include "meshtrain/train/loop/evaluator.hpp"

#include <algorithm>

#include "meshtrain/core/error.hpp"

namespace meshtrain {

EvalResult evaluate(Model& model, DataLoader& loader, int64_t max_batches, Batch& scratch, int64_t micro_batches) {
  return evaluate(*sequential_micro_batches(model, micro_batches), loader, max_batches, scratch);
}

EvalResult evaluate(MicroBatchRunner& micro_batches, DataLoader& loader, int64_t max_batches, Batch& scratch) {
  int64_t available = loader.num_validation_batches();
  int64_t batches = max_batches > 0 ? std::min(max_batches, available) : available;
  if (batches == 0) throw DataError("the validation split is smaller than one batch");
  EvalSums sums;
  for (int64_t k = 0; k < batches; ++k) {
    loader.validation_batch(k, scratch);
    micro_batches.evaluate(scratch, sums);
  }
  const EvalSums total = micro_batches.shared(sums);
  const int64_t count = total.predictions;
  return {total.loss_sum / count, static_cast<double>(total.correct) / count, count, batches, total.loss_sum,
          total.correct};
}

EvalResult combine_eval_sums(double loss_sum, double correct, double predictions, int64_t batches) {
  const auto count = static_cast<int64_t>(predictions);
  return {loss_sum / predictions, correct / predictions, count, batches, loss_sum, static_cast<int64_t>(correct)};
}

}  // namespace meshtrain
