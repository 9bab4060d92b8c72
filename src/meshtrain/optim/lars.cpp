#include "meshtrain/optim/lars.hpp"

#include <cmath>

#include "meshtrain/kernels/norm.hpp"

namespace meshtrain {

Lars::Lars(const ParamStore& store, std::span<const FlatSegment> segments, const OptimizerConfig& config)
    : Optimizer(store, segments),
      weight_decay_(config.weight_decay),
      eta_(config.trust_coefficient),
      momentum_(float(config.momentum)),
      nesterov_(config.nesterov),
      w_sq_(chunks_.size()),
      g_sq_(chunks_.size()),
      view_sums_(2 * store.views().size()),
      trust_(store.views().size(), 1.0) {
  for (size_t v = 0; v < store.views().size(); ++v) decays_.push_back(store.view(v).weight_decay);
  if (momentum_ != 0.0f) momentum_buffer_.resize(local_size());
}

void Lars::update(const UpdateBuffers& buffers, float lr) {
  const long n_chunks = long(chunks_.size());

  // Pass 1: partial norms of the views that adapt.
#pragma omp parallel for schedule(static)
  for (long c = 0; c < n_chunks; ++c) {
    const UpdateChunk& ch = chunks_.chunks[size_t(c)];
    if (!ch.weight_decay) continue;
    w_sq_[size_t(c)] = kernels::sum_squares(buffers.params_of(ch), ch.size);
    g_sq_[size_t(c)] = kernels::sum_squares(buffers.grads_of(ch), ch.size);
  }
  // Per view, in chunk order (deterministic); cheap, so serial. Then summed
  // over the ranks when the view is sharded.
  const size_t n_views = trust_.size();
  for (size_t v = 0; v < n_views; ++v) {
    double ws = 0, gs = 0;
    if (decays_[v])
      for (size_t c = chunks_.first[v]; c < chunks_.first[v + 1]; ++c) ws += w_sq_[c], gs += g_sq_[c];
    view_sums_[2 * v] = ws;
    view_sums_[2 * v + 1] = gs;
  }
  reduce_view_sums(view_sums_);
  for (size_t v = 0; v < n_views; ++v) {
    trust_[v] = 1.0;
    if (!decays_[v]) continue;
    const double w_norm = std::sqrt(view_sums_[2 * v]), g_norm = std::sqrt(view_sums_[2 * v + 1]);
    if (w_norm > 0 && g_norm > 0) trust_[v] = eta_ * w_norm / (g_norm + weight_decay_ * w_norm);
  }

  // Pass 2: fused scaled-gradient + momentum update.
  const bool use_momentum = momentum_ != 0.0f;
#pragma omp parallel for schedule(static)
  for (long c = 0; c < n_chunks; ++c) {
    const UpdateChunk& ch = chunks_.chunks[size_t(c)];
    float* w = buffers.params_of(ch);
    const float* g = buffers.grads_of(ch);
    float* buf = use_momentum ? momentum_buffer_.raw() + ch.local : nullptr;
    const float wd = ch.weight_decay ? float(weight_decay_) : 0.0f;
    const float trust = float(trust_[ch.view]);
    for (size_t i = 0; i < ch.size; ++i) {
      float d = trust * (g[i] + wd * w[i]);
      if (use_momentum) {
        buf[i] = momentum_ * buf[i] + d;
        d = nesterov_ ? d + momentum_ * buf[i] : buf[i];
      }
      w[i] -= lr * d;
    }
  }
  ++steps_;
}

std::vector<std::pair<std::string, DeviceArray<float>*>> Lars::state_buffers() {
  if (momentum_buffer_.size() == 0) return {};
  return {{"momentum_buffer", &momentum_buffer_}};
}

}  // namespace meshtrain
