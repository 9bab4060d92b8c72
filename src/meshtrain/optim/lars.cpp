#include "meshtrain/optim/lars.hpp"

#include <cmath>

namespace meshtrain {

Lars::Lars(const ParamStore& store, const OptimizerConfig& config)
    : chunks_(store),
      weight_decay_(config.weight_decay),
      eta_(config.trust_coefficient),
      momentum_(float(config.momentum)),
      nesterov_(config.nesterov),
      w_sq_(chunks_.size()),
      g_sq_(chunks_.size()),
      trust_(store.views().size(), 1.0) {
  if (momentum_ != 0.0f) momentum_buffer_.resize(store.flat_size());
}

void Lars::step(ParamStore& store, float lr) {
  chunks_.check_layout(store, "lars");
  float* w = store.params().data();
  const float* g = store.grads().data();
  float* buf = momentum_buffer_.data();
  const long n_chunks = long(chunks_.size());

  // Pass 1: partial norms of the views that adapt.
#pragma omp parallel for schedule(static)
  for (long c = 0; c < n_chunks; ++c) {
    const UpdateChunk& ch = chunks_.chunks[size_t(c)];
    if (!ch.weight_decay) continue;
    w_sq_[size_t(c)] = sum_squares(w + ch.begin, ch.end - ch.begin);
    g_sq_[size_t(c)] = sum_squares(g + ch.begin, ch.end - ch.begin);
  }
  // Per view, in chunk order (deterministic); cheap, so serial.
  for (size_t v = 0; v + 1 < chunks_.first.size(); ++v) {
    trust_[v] = 1.0;
    if (!store.view(v).weight_decay) continue;
    double ws = 0, gs = 0;
    for (size_t c = chunks_.first[v]; c < chunks_.first[v + 1]; ++c) ws += w_sq_[c], gs += g_sq_[c];
    const double w_norm = std::sqrt(ws), g_norm = std::sqrt(gs);
    if (w_norm > 0 && g_norm > 0) trust_[v] = eta_ * w_norm / (g_norm + weight_decay_ * w_norm);
  }

  // Pass 2: fused scaled-gradient + momentum update.
  const bool use_momentum = momentum_ != 0.0f;
#pragma omp parallel for schedule(static)
  for (long c = 0; c < n_chunks; ++c) {
    const UpdateChunk& ch = chunks_.chunks[size_t(c)];
    const float wd = ch.weight_decay ? float(weight_decay_) : 0.0f;
    const float trust = float(trust_[ch.view]);
    for (size_t i = ch.begin; i < ch.end; ++i) {
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

std::vector<std::pair<std::string, AlignedBuffer<float>*>> Lars::state_buffers() {
  if (momentum_buffer_.size() == 0) return {};
  return {{"momentum_buffer", &momentum_buffer_}};
}

}  // namespace meshtrain
