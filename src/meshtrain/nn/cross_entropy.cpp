#include "meshtrain/nn/cross_entropy.hpp"

#include <string>

#include "meshtrain/core/error.hpp"

namespace meshtrain::nn {

void check_targets(const char* who, const int32_t* targets, int64_t N, int64_t V) {
  for (int64_t n = 0; n < N; ++n)
    if (targets[n] < 0 || targets[n] >= V)
      throw Error(std::string(who) + ": target " + std::to_string(targets[n]) + " at row " + std::to_string(n) +
                  " is outside [0, " + std::to_string(V) + ")");
}

ForwardResult mean_loss_and_hits(kernels::Backend& backend, const float* loss_hits, int64_t N) {
  double sums[2];  // loss, hits
  backend.sums_in_order(loss_hits, static_cast<size_t>(N), 2, sums);
  ForwardResult r;
  r.correct = static_cast<int64_t>(sums[1]);
  r.count = N;
  r.loss = static_cast<float>(sums[0] / N);
  return r;
}

void SoftmaxCrossEntropy::begin(const int32_t* targets, int64_t N, int64_t V) {
  if (N <= 0) throw Error("SoftmaxCrossEntropy: no rows");
  check_targets("SoftmaxCrossEntropy", targets, N, V);
  lse_.ensure(N);
  loss_.ensure(2 * N);
  logits_ = nullptr;
  targets_ = staged_input(backend_, targets, static_cast<size_t>(N), targets_staged_);
  N_ = N;
  V_ = V;
}

ForwardResult SoftmaxCrossEntropy::finish() const { return mean_loss_and_hits(backend_, loss_.raw(), N_); }

ForwardResult SoftmaxCrossEntropy::forward(const float* logits, const int32_t* targets, int64_t N, int64_t V) {
  begin(targets, N, V);
  logits_ = logits;
  backend_.softmax_xent_forward(lse_.raw(), loss_.raw(), loss_.raw() + N, logits, targets_, N, V);
  return finish();
}

void SoftmaxCrossEntropy::rows(float* logits, int64_t r0, int64_t rows) {
  backend_.softmax_xent_forward(lse_.raw() + r0, loss_.raw() + r0, loss_.raw() + N_ + r0, logits, targets_ + r0, rows,
                                V_);
  backend_.softmax_xent_backward(logits, logits, lse_.raw() + r0, targets_ + r0, rows, V_, 1.0f / N_);
}

void SoftmaxCrossEntropy::backward(float* dlogits) {
  if (!logits_) throw Error("SoftmaxCrossEntropy::backward called before forward");
  backend_.softmax_xent_backward(dlogits, logits_, lse_.raw(), targets_, N_, V_, 1.0f / N_);
}

}  // namespace meshtrain::nn
