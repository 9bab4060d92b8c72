#include "meshtrain/optim/lamb.hpp"

#include <cmath>

namespace meshtrain {

Lamb::Lamb(const ParamStore& store, const OptimizerConfig& config)
    : chunks_(store),
      weight_decay_(config.weight_decay),
      beta1_(config.beta1),
      beta2_(config.beta2),
      eps_(config.eps),
      w_sq_(chunks_.size()),
      u_sq_(chunks_.size()),
      trust_(store.views().size(), 1.0) {
  exp_avg_.resize(store.flat_size());
  exp_avg_sq_.resize(store.flat_size());
}

void Lamb::step(ParamStore& store, float lr) {
  chunks_.check_layout(store, "lamb");
  const double t = double(steps_ + 1);
  const float b1 = float(beta1_), one_minus_b1 = float(1.0 - beta1_);
  const float b2 = float(beta2_), one_minus_b2 = float(1.0 - beta2_);
  const float bc1 = float(1.0 - std::pow(beta1_, t));
  const float bc2_sqrt = float(std::sqrt(1.0 - std::pow(beta2_, t)));
  const float eps = float(eps_);

  float* w = store.params().data();
  const float* g = store.grads().data();
  float* m = exp_avg_.data();
  float* v = exp_avg_sq_.data();
  // u for one element; both passes use this, so the applied u is the measured u.
  auto update = [&](size_t i, float wd) {
    return (m[i] / bc1) / (std::sqrt(v[i]) / bc2_sqrt + eps) + wd * w[i];
  };
  const long n_chunks = long(chunks_.size());

  // Pass 1: moments and partial norms of w and u.
#pragma omp parallel for schedule(static)
  for (long c = 0; c < n_chunks; ++c) {
    const UpdateChunk& ch = chunks_.chunks[size_t(c)];
    const float wd = ch.weight_decay ? float(weight_decay_) : 0.0f;
    double ws = 0, us = 0;
    for (size_t i = ch.begin; i < ch.end; ++i) {
      m[i] = b1 * m[i] + one_minus_b1 * g[i];
      v[i] = b2 * v[i] + one_minus_b2 * g[i] * g[i];
      const float u = update(i, wd);
      ws += double(w[i]) * double(w[i]);
      us += double(u) * double(u);
    }
    w_sq_[size_t(c)] = ws;
    u_sq_[size_t(c)] = us;
  }
  // Per view, in chunk order (deterministic); cheap, so serial.
  for (size_t view = 0; view + 1 < chunks_.first.size(); ++view) {
    trust_[view] = 1.0;
    if (!store.view(view).weight_decay) continue;
    double ws = 0, us = 0;
    for (size_t c = chunks_.first[view]; c < chunks_.first[view + 1]; ++c) ws += w_sq_[c], us += u_sq_[c];
    const double w_norm = std::sqrt(ws), u_norm = std::sqrt(us);
    if (w_norm > 0 && u_norm > 0) trust_[view] = w_norm / u_norm;
  }

  // Pass 2: apply.
#pragma omp parallel for schedule(static)
  for (long c = 0; c < n_chunks; ++c) {
    const UpdateChunk& ch = chunks_.chunks[size_t(c)];
    const float wd = ch.weight_decay ? float(weight_decay_) : 0.0f;
    const float scale = float(double(lr) * trust_[ch.view]);
    for (size_t i = ch.begin; i < ch.end; ++i) w[i] -= scale * update(i, wd);
  }
  ++steps_;
}

std::vector<std::pair<std::string, AlignedBuffer<float>*>> Lamb::state_buffers() {
  return {{"exp_avg", &exp_avg_}, {"exp_avg_sq", &exp_avg_sq_}};
}

}  // namespace meshtrain
