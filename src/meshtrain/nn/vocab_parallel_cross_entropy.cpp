#include "meshtrain/nn/vocab_parallel_cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/cross_entropy.hpp"

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
  for (int64_t n = 0; n < N; ++n)
    if (targets[n] < 0 || targets[n] >= V_)
      throw Error("VocabParallelCrossEntropy: target " + std::to_string(targets[n]) + " at row " +
                  std::to_string(n) + " is outside [0, " + std::to_string(V_) + ")");
  row_max_.ensure(N);
  local_max_.ensure(N);
  argmax_.ensure(N);
  sums_.ensure(2 * N);
  lse_.ensure(N);
  logits_ = logits;
  targets_ = targets;
  N_ = N;
  const size_t rows = static_cast<size_t>(N);
  float* local = local_max_.data();
  float* mx = row_max_.data();
  int32_t* arg = argmax_.data();
  backend_.row_max_argmax(local, arg, logits, N, V_cols_);
  std::copy(local, local + N, mx);
  tp_->all_reduce_max(mx, rows);
  // A shard whose max is the row's offers its first column holding it, the
  // others V (past every column): the min is the serial argmax.
  for (int64_t n = 0; n < N; ++n) arg[n] = local[n] == mx[n] ? static_cast<int32_t>(v0_ + arg[n]) : int32_t(V_);
  tp_->all_reduce_min(arg, rows);
  float* sumexp = sums_.data();
  float* target_logit = sums_.data() + N;
  backend_.softmax_xent_shard_sums(sumexp, target_logit, logits, mx, targets, N, V_cols_, v0_);
  tp_->all_reduce_sum_fp32(sums_.data(), 2 * rows);
  ForwardResult r;
  r.count = N;
  // Summed serially in double, as SoftmaxCrossEntropy sums.
  double sum = 0;
  for (int64_t n = 0; n < N; ++n) {
    lse_[n] = mx[n] + std::log(sumexp[n]);
    const float loss = lse_[n] - target_logit[n];
    sum += loss;
    r.correct += arg[n] == targets[n];
  }
  r.loss = static_cast<float>(sum / N);
  return r;
}

void VocabParallelCrossEntropy::backward(float* dlogits) {
  if (!tp_) return serial_.backward(dlogits);
  if (!logits_) throw Error("VocabParallelCrossEntropy::backward called before forward");
  backend_.softmax_xent_backward(dlogits, logits_, lse_.data(), targets_, N_, V_cols_, 1.0f / N_, v0_);
}

}  // namespace meshtrain::nn
