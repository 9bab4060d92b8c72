#include "meshtrain/optim/adamw.hpp"

#include <cmath>

namespace meshtrain {

AdamW::AdamW(const ParamStore& store, std::span<const FlatSegment> segments, const OptimizerConfig& config)
    : Optimizer(store, segments),
      weight_decay_(config.weight_decay),
      beta1_(config.beta1),
      beta2_(config.beta2),
      eps_(config.eps) {
  exp_avg_.resize(local_size());
  exp_avg_sq_.resize(local_size());
}

void AdamW::update(const UpdateBuffers& buffers, float lr) {
  const double t = double(steps_ + 1);
  const float decay_factor = float(1.0 - double(lr) * weight_decay_);
  const float one_minus_b1 = float(1.0 - beta1_);
  const float b2 = float(beta2_), one_minus_b2 = float(1.0 - beta2_);
  const float step_size = float(double(lr) / (1.0 - std::pow(beta1_, t)));
  const float bc2_sqrt = float(std::sqrt(1.0 - std::pow(beta2_, t)));
  const float eps = float(eps_);

  const long n_chunks = long(chunks_.size());
#pragma omp parallel for schedule(static)
  for (long c = 0; c < n_chunks; ++c) {
    const UpdateChunk& ch = chunks_.chunks[size_t(c)];
    // Four distinct buffers: __restrict lets the compiler vectorize the loop
    // (sqrt and division included; IEEE-exact, so results are unchanged).
    float* __restrict w = buffers.params_of(ch);
    const float* __restrict g = buffers.grads_of(ch);
    float* __restrict m = exp_avg_.data() + ch.local;
    float* __restrict v = exp_avg_sq_.data() + ch.local;
    const float decay = ch.weight_decay ? decay_factor : 1.0f;
    for (size_t i = 0; i < ch.size; ++i) {
      m[i] += one_minus_b1 * (g[i] - m[i]);
      v[i] = b2 * v[i] + one_minus_b2 * g[i] * g[i];
      const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
      w[i] = w[i] * decay - step_size * (m[i] / denom);
    }
  }
  ++steps_;
}

std::vector<std::pair<std::string, AlignedBuffer<float>*>> AdamW::state_buffers() {
  return {{"exp_avg", &exp_avg_}, {"exp_avg_sq", &exp_avg_sq_}};
}

}  // namespace meshtrain
