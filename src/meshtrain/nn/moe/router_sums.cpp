#include "meshtrain/nn/moe/router_sums.hpp"

#include <algorithm>

namespace meshtrain::nn {

RouterSums::RouterSums(int64_t n_expert, int64_t n_embd, bool balancing_gradient)
    : E_(n_expert), C_(n_embd), balancing_(balancing_gradient) {
  values_.assign(size_t(3 + 2 * E_ + (balancing_ ? C_ * E_ * (1 + E_) : 0)), 0.0);
}

void RouterSums::reset() { std::fill(values_.begin(), values_.end(), 0.0); }

void RouterSums::add_tokens(double tokens, double dropped, double z_squares) {
  values_[0] += tokens;
  values_[1] += dropped;
  values_[2] += z_squares;
}

double RouterSums::balancing_loss(double coef, int64_t top_k) const {
  const double N = tokens();
  if (N <= 0) return 0;
  double sum = 0;
  for (int64_t e = 0; e < E_; ++e) sum += count(e) * probability_sum(e);
  return coef * double(E_) / (N * N * double(top_k)) * sum;
}

void RouterSums::balancing_gradient(double coef, int64_t top_k, float* dw) const {
  const double N = tokens();
  std::fill(dw, dw + C_ * E_, 0.0f);
  if (!balancing_ || N <= 0) return;
  std::vector<double> g(static_cast<size_t>(E_));
  for (int64_t e = 0; e < E_; ++e) g[size_t(e)] = coef * double(E_) * count(e) / (N * N * double(top_k));
  const double* A = values_.data() + 3 + 2 * E_;
  const double* B = A + C_ * E_;
  for (int64_t c = 0; c < C_; ++c)
    for (int64_t j = 0; j < E_; ++j) {
      double v = g[size_t(j)] * A[c * E_ + j];
      for (int64_t i = 0; i < E_; ++i) v -= g[size_t(i)] * B[(c * E_ + i) * E_ + j];
      dw[c * E_ + j] = static_cast<float>(v);
    }
}

}  // namespace meshtrain::nn
