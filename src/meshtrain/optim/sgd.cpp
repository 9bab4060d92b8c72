#include "meshtrain/optim/sgd.hpp"

namespace meshtrain {

Sgd::Sgd(const ParamStore& store, std::span<const FlatSegment> segments, const OptimizerConfig& config)
    : Optimizer(store, segments),
      weight_decay_(float(config.weight_decay)),
      momentum_(float(config.momentum)),
      nesterov_(config.nesterov) {
  if (momentum_ != 0.0f) momentum_buffer_.resize(local_size());
}

void Sgd::update(const UpdateBuffers& buffers, float lr) {
  const bool use_momentum = momentum_ != 0.0f;
  const long n_chunks = long(chunks_.size());
#pragma omp parallel for schedule(static)
  for (long c = 0; c < n_chunks; ++c) {
    const UpdateChunk& ch = chunks_.chunks[size_t(c)];
    float* w = buffers.params_of(ch);
    const float* g = buffers.grads_of(ch);
    float* buf = use_momentum ? momentum_buffer_.raw() + ch.local : nullptr;
    const float wd = ch.weight_decay ? weight_decay_ : 0.0f;
    for (size_t i = 0; i < ch.size; ++i) {
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

std::vector<std::pair<std::string, DeviceArray<float>*>> Sgd::state_buffers() {
  if (momentum_buffer_.size() == 0) return {};
  return {{"momentum_buffer", &momentum_buffer_}};
}

}  // namespace meshtrain
