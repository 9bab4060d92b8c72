#pragma once
// One mixture-of-experts layer's routing statistics over a training step:
// what the load-balancing loss needs over the global batch, and what the
// metrics report. The step engine resets them before the step's first
// forward, sums them over the data-parallel ranks after the last backward
// (they add over tokens, so any split of the global batch gives the same
// sums), and then the layer's router takes the loss's gradient from them.
//
// Why sums and not a loss in the graph: the Switch/GShard loss
//   L_aux = coef E / (N^2 k) sum_i c_i S_i,   S_i = sum_t p_ti,
// needs c_i, the tokens routed to expert i over the whole global batch (N
// tokens), which is known only after every micro-batch's forward; a
// pipeline's 1F1B schedule runs some backwards before that. c carries no
// gradient, and L_aux's gradient with respect to the router weight W (z =
// x W, p = softmax(z)) is, with g_i = coef E c_i / (N^2 k),
//   dL/dW[:, j] = g_j A[:, j] - sum_i g_i B[:, i, j],
//   A[:, j] = sum_t x_t p_tj,   B[:, i, j] = sum_t x_t p_ti p_tj,
// bilinear in g and in sums over tokens: accumulated during the step, exact
// after it, under any data, expert or pipeline layout and micro-batching.
// The price (a documented choice): the balancing loss trains the router's
// weight, not the token representations below it.
#include <cstdint>
#include <span>
#include <vector>

namespace meshtrain::nn {

class RouterSums {
 public:
  RouterSums(int64_t n_expert, int64_t n_embd, bool balancing_gradient);

  void reset();
  // Every sum as one vector (for the reduction over ranks) and back.
  std::span<double> values() { return values_; }

  int64_t n_expert() const { return E_; }
  double tokens() const { return values_[0]; }
  double dropped() const { return values_[1]; }       // (token, expert) choices over capacity
  double z_squares() const { return values_[2]; }     // sum_t logsumexp(z_t)^2
  double count(int64_t e) const { return values_[3 + e]; }          // c_e: choices of expert e (before drops)
  double probability_sum(int64_t e) const { return values_[3 + E_ + e]; }  // S_e
  bool has_balancing_sums() const { return balancing_; }
  // A (C, E) and B (C, E, E), row-major; empty without balancing sums.
  std::span<double> a() { return {values_.data() + 3 + 2 * E_, balancing_ ? size_t(C_ * E_) : 0}; }
  std::span<double> b() { return {values_.data() + 3 + 2 * E_ + C_ * E_, balancing_ ? size_t(C_ * E_ * E_) : 0}; }

  // One micro-batch's counts and z-squares (the router's forward).
  void add_tokens(double tokens, double dropped, double z_squares);
  double* counts() { return values_.data() + 3; }
  double* probability_sums() { return values_.data() + 3 + E_; }

  // The balancing loss's value and, into dw (C, E), its gradient with
  // respect to the router weight, from sums over the global batch: the
  // header comment's formula. top_k: experts per token.
  double balancing_loss(double coef, int64_t top_k) const;
  void balancing_gradient(double coef, int64_t top_k, float* dw) const;

 private:
  int64_t E_, C_;
  bool balancing_;
  std::vector<double> values_;
};

}  // namespace meshtrain::nn
