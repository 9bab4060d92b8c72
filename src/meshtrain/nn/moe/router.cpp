#include "meshtrain/nn/moe/router.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/gemm.hpp"
#include "meshtrain/nn/backend.hpp"
#include "meshtrain/nn/init.hpp"

namespace meshtrain::nn {

using kernels::Trans;

int64_t MoeConfig::capacity(int64_t T) const {
  if (capacity_factor <= 0) return 0;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(capacity_factor * double(T * top_k) / double(n_expert))));
}

Router::Router(ParamStore& store, const std::string& prefix, int64_t C, const MoeConfig& config)
    : store_(store), C_(C), E_(config.n_expert), k_(config.top_k), config_(config) {
  if (k_ < 1 || k_ > E_)
    throw ConfigError("model.top_k = " + std::to_string(k_) + " must be between 1 and model.n_expert = " +
                      std::to_string(E_));
  weight_ = store.declare(prefix + ".weight", Shape{C, E_}, true);
  has_bias_ = config.expert_bias_rate > 0;
  if (has_bias_) bias_ = store.declare(prefix + ".expert_bias", Shape{E_}, false);
}

void Router::init(Rng& rng, float stddev) {
  fill_normal(store_, weight_, rng, stddev);
  if (has_bias_) fill_constant(store_.param(bias_), size_t(E_), 0.0f);
}

// Capacity per sequence: first choices first, earlier tokens first.
int64_t Router::apply_capacity(int64_t B, int64_t T) {
  const int64_t k = k_;
  std::fill(kept_.data(), kept_.data() + B * T * k, uint8_t{1});
  int64_t dropped = 0;
  const int64_t capacity = config_.capacity(T);
  if (capacity <= 0) return 0;
  std::vector<int64_t> used(static_cast<size_t>(E_));
  for (int64_t b = 0; b < B; ++b) {
    std::fill(used.begin(), used.end(), 0);
    for (int64_t r = 0; r < k; ++r)
      for (int64_t t = b * T; t < (b + 1) * T; ++t) {
        const int32_t e = choices_.data()[t * k + r];
        if (used[size_t(e)] < capacity) {
          ++used[size_t(e)];
        } else {
          kept_.data()[t * k + r] = 0;
          ++dropped;
        }
      }
  }
  return dropped;
}

void Router::forward(const float* x, int64_t B, int64_t T, RouterSums* sums) {
  const int64_t N = B * T, E = E_, k = k_;
  x_ = x;
  N_ = N;
  z_.ensure(store_.device_memory(), size_t(N * E));
  lse_.ensure(N);
  choices_.ensure(N * k);
  gates_.ensure(N * k);
  kept_.ensure(N * k);
  // z (N, E) = x (N, C) W (C, E), where the store's kernels run
  if (store_.bf16_products())
    backend_of(store_).gemm_bf16(Trans::No, Trans::No, int(N), int(E), int(C_), 1.0f,
                                 round_into(store_, x, size_t(N * C_), x16_), int(C_),
                                 round_into(store_, store_.param(weight_), size_t(C_ * E), w16_), int(E), 0.0f,
                                 z_.kernel(), int(E));
  else
    backend_of(store_).gemm(Trans::No, Trans::No, int(N), int(E), int(C_), 1.0f, x, int(C_), store_.param(weight_),
                            int(E), 0.0f, z_.kernel(), int(E));
  z_.download(0, size_t(N * E));
  float* p = z_.host();
  const float* bias = has_bias_ ? host_bias() : nullptr;
  double z_squares = 0;
  std::vector<float> score(static_cast<size_t>(E));
  for (int64_t t = 0; t < N; ++t) {
    float* pt = p + t * E;
    const float m = *std::max_element(pt, pt + E);
    double s = 0;
    for (int64_t e = 0; e < E; ++e) s += std::exp(double(pt[e] - m));
    const double lse = double(m) + std::log(s);
    lse_.data()[t] = float(lse);
    z_squares += lse * lse;
    for (int64_t e = 0; e < E; ++e) pt[e] = float(std::exp(double(pt[e]) - lse));
    for (int64_t e = 0; e < E; ++e) score[size_t(e)] = pt[e] + (bias ? bias[e] : 0.0f);
    // Top k by score, ties to the lower expert id.
    int32_t* ch = choices_.data() + t * k;
    double chosen = 0;
    for (int64_t r = 0; r < k; ++r) {
      int64_t best = -1;
      for (int64_t e = 0; e < E; ++e) {
        if (std::find(ch, ch + r, int32_t(e)) != ch + r) continue;
        if (best < 0 || score[size_t(e)] > score[size_t(best)]) best = e;
      }
      ch[r] = int32_t(best);
      chosen += pt[best];
    }
    for (int64_t r = 0; r < k; ++r)
      gates_.data()[t * k + r] = k == 1 ? pt[ch[r]] : float(double(pt[ch[r]]) / chosen);
  }
  const int64_t dropped = apply_capacity(B, T);
  if (!sums) return;
  sums->add_tokens(double(N), double(dropped), z_squares);
  double* counts = sums->counts();
  double* psums = sums->probability_sums();
  for (int64_t i = 0; i < N * k; ++i) counts[choices_.data()[i]] += 1;
  for (int64_t t = 0; t < N; ++t)
    for (int64_t e = 0; e < E; ++e) psums[e] += p[t * E + e];
  if (!sums->has_balancing_sums()) return;
  // A (C, E) += x^T p; B (C, E E) += x^T q with q_t = p_t (outer) p_t:
  // the products where x is, their results added on the host.
  z_.upload(0, size_t(N * E));  // the probabilities
  q_.ensure(store_.device_memory(), size_t(N * E * E));
  part_.ensure(size_t(C_ * E * E));
  std::vector<float> part(size_t(C_ * E * E));
  backend_of(store_).gemm(Trans::Yes, Trans::No, int(C_), int(E), int(N), 1.0f, x, int(C_), z_.kernel(), int(E), 0.0f,
                          part_.raw(), int(E));
  std::span<double> a = sums->a();
  part_.download(std::span<float>(part.data(), a.size()));
  for (size_t i = 0; i < a.size(); ++i) a[i] += part[i];
  float* q = q_.host();
  for (int64_t t = 0; t < N; ++t)
    for (int64_t i = 0; i < E; ++i)
      for (int64_t j = 0; j < E; ++j) q[size_t((t * E + i) * E + j)] = p[t * E + i] * p[t * E + j];
  q_.upload(0, size_t(N * E * E));
  backend_of(store_).gemm(Trans::Yes, Trans::No, int(C_), int(E * E), int(N), 1.0f, x, int(C_), q_.kernel(),
                          int(E * E), 0.0f, part_.raw(), int(E * E));
  part_.download(part);
  std::span<double> bsum = sums->b();
  for (size_t i = 0; i < bsum.size(); ++i) bsum[i] += part[i];
}

void Router::backward(const float* dgates, float* dx) {
  if (!x_) throw Error("Router::backward called before forward");
  const int64_t N = N_, E = E_, k = k_;
  const float* p = z_.host();  // forward's probabilities
  dz_.ensure(store_.device_memory(), size_t(N * E));
  float* dz = dz_.host();
  std::vector<double> dp(static_cast<size_t>(E));
  const double z_coef = config_.z_loss_coef;
  for (int64_t t = 0; t < N; ++t) {
    const float* pt = p + t * E;
    const int32_t* ch = choices_.data() + t * k;
    const float* g = gates_.data() + t * k;
    const float* dg = dgates + t * k;
    std::fill(dp.begin(), dp.end(), 0.0);
    if (k == 1) {
      dp[size_t(ch[0])] = dg[0];
    } else {
      double chosen = 0, dot = 0;
      for (int64_t r = 0; r < k; ++r) {
        chosen += pt[ch[r]];
        dot += double(dg[r]) * g[r];
      }
      for (int64_t r = 0; r < k; ++r) dp[size_t(ch[r])] = (double(dg[r]) - dot) / chosen;
    }
    double pdp = 0;
    for (int64_t e = 0; e < E; ++e) pdp += pt[e] * dp[size_t(e)];
    const double z_grad = z_coef * 2.0 * double(lse_.data()[t]) / double(N);  // d mean(lse^2) / d lse
    for (int64_t e = 0; e < E; ++e)
      dz[size_t(t * E + e)] = float(pt[e] * (dp[size_t(e)] - pdp) + z_grad * pt[e]);
  }
  dz_.upload(0, size_t(N * E));
  // dW (C, E) += x^T dz; dx (N, C) += dz W^T
  if (store_.bf16_products()) {  // on forward's rounded x and W
    const Bf16* dz16 = round_into(store_, dz_.kernel(), size_t(N * E), dz16_);
    backend_of(store_).gemm_bf16(Trans::Yes, Trans::No, int(C_), int(E), int(N), 1.0f, x16_.raw(), int(C_), dz16,
                                 int(E), 1.0f, store_.grad(weight_), int(E));
    backend_of(store_).gemm_bf16(Trans::No, Trans::Yes, int(N), int(C_), int(E), 1.0f, dz16, int(E), w16_.raw(),
                                 int(E), 1.0f, dx, int(C_));
  } else {
    backend_of(store_).gemm(Trans::Yes, Trans::No, int(C_), int(E), int(N), 1.0f, x_, int(C_), dz_.kernel(), int(E),
                            1.0f, store_.grad(weight_), int(E));
    backend_of(store_).gemm(Trans::No, Trans::Yes, int(N), int(C_), int(E), 1.0f, dz_.kernel(), int(E),
                            store_.param(weight_), int(E), 1.0f, dx, int(C_));
  }
  store_.grad_ready(weight_);
  if (has_bias_) store_.grad_ready(bias_);
}

void Router::update_expert_bias(const RouterSums& global) {
  if (!has_bias_) return;
  double mean = 0;
  for (int64_t e = 0; e < E_; ++e) mean += global.count(e);
  mean /= double(E_);
  host_bias();
  const float rate = static_cast<float>(config_.expert_bias_rate);
  for (int64_t e = 0; e < E_; ++e) {
    const double load = global.count(e);
    bias_values_[size_t(e)] += load < mean ? rate : load > mean ? -rate : 0.0f;
  }
  memory_of(store_).upload(store_.param(bias_), bias_values_.data(), bias_values_.size() * sizeof(float));
}

const float* Router::host_bias() {
  bias_values_.resize(size_t(E_));
  memory_of(store_).download(bias_values_.data(), store_.param(bias_), bias_values_.size() * sizeof(float));
  return bias_values_.data();
}

}  // namespace meshtrain::nn
