#include "meshtrain/optim/lamb.hpp"

#include <cmath>

namespace meshtrain {

Lamb::Lamb(const ParamStore& store, std::span<const FlatSegment> segments, const OptimizerConfig& config)
    : Optimizer(store, segments),
      weight_decay_(config.weight_decay),
      beta1_(config.beta1),
      beta2_(config.beta2),
      eps_(config.eps),
      w_sq_(chunks_.size()),
      u_sq_(chunks_.size()),
      view_sums_(2 * store.views().size()),
      trust_(store.views().size(), 1.0) {
  for (size_t v = 0; v < store.views().size(); ++v) decays_.push_back(store.view(v).weight_decay);
  exp_avg_.resize(local_size());
  exp_avg_sq_.resize(local_size());
}

void Lamb::update(const UpdateBuffers& buffers, float lr) {
  const double t = double(steps_ + 1);
  const float b1 = float(beta1_), one_minus_b1 = float(1.0 - beta1_);
  const float b2 = float(beta2_), one_minus_b2 = float(1.0 - beta2_);
  const float bc1 = float(1.0 - std::pow(beta1_, t));
  const float bc2_sqrt = float(std::sqrt(1.0 - std::pow(beta2_, t)));
  const float eps = float(eps_);
  // u for one element; both passes use this, so the applied u is the measured u.
  auto update_of = [&](float m, float v, float w, float wd) {
    return (m / bc1) / (std::sqrt(v) / bc2_sqrt + eps) + wd * w;
  };
  const long n_chunks = long(chunks_.size());

  // Pass 1: moments and partial norms of w and u.
#pragma omp parallel for schedule(static)
  for (long c = 0; c < n_chunks; ++c) {
    const UpdateChunk& ch = chunks_.chunks[size_t(c)];
    const float* w = buffers.params_of(ch);
    const float* g = buffers.grads_of(ch);
    float* m = exp_avg_.raw() + ch.local;
    float* v = exp_avg_sq_.raw() + ch.local;
    const float wd = ch.weight_decay ? float(weight_decay_) : 0.0f;
    double ws = 0, us = 0;
    for (size_t i = 0; i < ch.size; ++i) {
      m[i] = b1 * m[i] + one_minus_b1 * g[i];
      v[i] = b2 * v[i] + one_minus_b2 * g[i] * g[i];
      const float u = update_of(m[i], v[i], w[i], wd);
      ws += double(w[i]) * double(w[i]);
      us += double(u) * double(u);
    }
    w_sq_[size_t(c)] = ws;
    u_sq_[size_t(c)] = us;
  }
  // Per view, in chunk order (deterministic); cheap, so serial. Then summed
  // over the ranks when the view is sharded.
  const size_t n_views = trust_.size();
  for (size_t view = 0; view < n_views; ++view) {
    double ws = 0, us = 0;
    if (decays_[view])
      for (size_t c = chunks_.first[view]; c < chunks_.first[view + 1]; ++c) ws += w_sq_[c], us += u_sq_[c];
    view_sums_[2 * view] = ws;
    view_sums_[2 * view + 1] = us;
  }
  reduce_view_sums(view_sums_);
  for (size_t view = 0; view < n_views; ++view) {
    trust_[view] = 1.0;
    if (!decays_[view]) continue;
    const double w_norm = std::sqrt(view_sums_[2 * view]), u_norm = std::sqrt(view_sums_[2 * view + 1]);
    if (w_norm > 0 && u_norm > 0) trust_[view] = w_norm / u_norm;
  }

  // Pass 2: apply.
#pragma omp parallel for schedule(static)
  for (long c = 0; c < n_chunks; ++c) {
    const UpdateChunk& ch = chunks_.chunks[size_t(c)];
    float* w = buffers.params_of(ch);
    const float* m = exp_avg_.raw() + ch.local;
    const float* v = exp_avg_sq_.raw() + ch.local;
    const float wd = ch.weight_decay ? float(weight_decay_) : 0.0f;
    const float scale = float(double(lr) * trust_[ch.view]);
    for (size_t i = 0; i < ch.size; ++i) w[i] -= scale * update_of(m[i], v[i], w[i], wd);
  }
  ++steps_;
}

std::vector<std::pair<std::string, DeviceArray<float>*>> Lamb::state_buffers() {
  return {{"exp_avg", &exp_avg_}, {"exp_avg_sq", &exp_avg_sq_}};
}

}  // namespace meshtrain
