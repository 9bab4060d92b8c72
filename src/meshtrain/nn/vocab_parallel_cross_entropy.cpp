#include "meshtrain/nn/vocab_parallel_cross_entropy.hpp"

#include <limits>
#include <string>

#include "meshtrain/core/error.hpp"

namespace meshtrain::nn {

VocabParallelCrossEntropy::VocabParallelCrossEntropy(kernels::Backend& backend, TensorParallelComm* tp, int64_t V)
    : backend_(backend), tp_(tp), V_(V), serial_(backend) {
  const int ways = tp ? tp->size() : 1;
  // Column indices travel as int32 (the argmax's all-reduce min), V itself
  // standing for "no column here".
  if (V <= 0 || V > std::numeric_limits<int32_t>::max() || V % ways != 0)
    throw Error("VocabParallelCrossEntropy: a vocabulary of " + std::to_string(V) +
                " does not split into the " + std::to_string(ways) + " tensor-parallel ways");
  V_cols_ = V / ways;
  v0_ = tp ? tp->rank() * V_cols_ : 0;
}

ForwardResult VocabParallelCrossEntropy::forward(const float* logits, const int32_t* targets, int64_t N) {
  if (!tp_) return serial_.forward(logits, targets, N, V_);
  if (N <= 0) throw Error("VocabParallelCrossEntropy: no rows");
  check_targets("VocabParallelCrossEntropy", targets, N, V_);
  const size_t rows = static_cast<size_t>(N);
  row_max_.ensure(rows);
  local_max_.ensure(rows);
  argmax_.ensure(rows);
  sums_.ensure(2 * rows);
  lse_.ensure(rows);
  loss_hits_.ensure(2 * rows);
  logits_ = logits;
  targets_ = staged_input(backend_, targets, rows, targets_staged_);
  N_ = N;
  float* local = local_max_.raw();
  float* mx = row_max_.raw();
  int32_t* arg = argmax_.raw();
  backend_.row_max_argmax(local, arg, logits, N, V_cols_);
  backend_.copy(mx, local, rows);
  tp_->all_reduce_max(mx, rows);
  backend_.shard_argmax_candidates(arg, local, mx, N, v0_, V_);
  tp_->all_reduce_min(arg, rows);
  float* sumexp = sums_.raw();
  float* target_logit = sums_.raw() + N;
  backend_.softmax_xent_shard_sums(sumexp, target_logit, logits, mx, targets_, N, V_cols_, v0_);
  tp_->all_reduce_sum_fp32(sums_.raw(), 2 * rows);
  float* loss = loss_hits_.raw();
  backend_.shard_loss_rows(lse_.raw(), loss, loss + N, mx, sumexp, target_logit, arg, targets_, N);
  return mean_loss_and_hits(backend_, loss, N);  // as the serial loss sums them
}

void VocabParallelCrossEntropy::backward(float* dlogits) {
  if (!tp_) return serial_.backward(dlogits);
  if (!logits_) throw Error("VocabParallelCrossEntropy::backward called before forward");
  backend_.softmax_xent_backward(dlogits, logits_, lse_.raw(), targets_, N_, V_cols_, 1.0f / N_, v0_);
}

}  // namespace meshtrain::nn
