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
  batch_.reserve(chunks_.size());
}

void AdamW::update(const UpdateBuffers& buffers, float lr) {
  const double t = double(steps_ + 1);
  const kernels::AdamWStep s{.decay_factor = float(1.0 - double(lr) * weight_decay_),
                             .one_minus_b1 = float(1.0 - beta1_),
                             .b2 = float(beta2_),
                             .one_minus_b2 = float(1.0 - beta2_),
                             .step_size = float(double(lr) / (1.0 - std::pow(beta1_, t))),
                             .bc2_sqrt = float(std::sqrt(1.0 - std::pow(beta2_, t))),
                             .eps = float(eps_)};
  batch_.clear();
  for (const UpdateChunk& ch : chunks_.chunks)
    batch_.push_back({buffers.params_of(ch), buffers.grads_of(ch), exp_avg_.raw() + ch.local,
                      exp_avg_sq_.raw() + ch.local, ch.size, ch.weight_decay});
  backend_.adamw_update(batch_, s);
  ++steps_;
}

std::vector<std::pair<std::string, DeviceArray<float>*>> AdamW::state_buffers() {
  return {{"exp_avg", &exp_avg_}, {"exp_avg_sq", &exp_avg_sq_}};
}

}  // namespace meshtrain
