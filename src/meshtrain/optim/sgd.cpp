#include "meshtrain/optim/sgd.hpp"

namespace meshtrain {

Sgd::Sgd(const ParamStore& store, const OptimizerConfig& config)
    : chunks_(store),
      weight_decay_(float(config.weight_decay)),
      momentum_(float(config.momentum)),
      nesterov_(config.nesterov) {
  if (momentum_ != 0.0f) momentum_buffer_.resize(store.flat_size());
}

void Sgd::step(ParamStore& store, float lr) {
  chunks_.check_layout(store, "sgd");
  float* w = store.params().data();
  const float* g = store.grads().data();
  float* buf = momentum_buffer_.data();
  const bool use_momentum = momentum_ != 0.0f;
  const long n_chunks = long(chunks_.size());
#pragma omp parallel for schedule(static)
  for (long c = 0; c < n_chunks; ++c) {
    const UpdateChunk& ch = chunks_.chunks[size_t(c)];
    const float wd = ch.weight_decay ? weight_decay_ : 0.0f;
    for (size_t i = ch.begin; i < ch.end; ++i) {
      float d = g[i] + wd * w[i];
      if (use_momentum) {
        buf[i] = momentum_ * buf[i] + d;
        d = nesterov_ ? d + momentum_ * buf[i] : buf[i];
      }
      w[i] -= lr * d;
    }
  }
  ++steps_;
}

std::vector<std::pair<std::string, AlignedBuffer<float>*>> Sgd::state_buffers() {
  if (momentum_buffer_.size() == 0) return {};
  return {{"momentum_buffer", &momentum_buffer_}};
}

}  // namespace meshtrain
