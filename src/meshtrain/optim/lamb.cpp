#include "meshtrain/optim/lamb.hpp"

#include <cmath>

namespace meshtrain {

Lamb::Lamb(const ParamStore& store, std::span<const FlatSegment> segments, const OptimizerConfig& config)
    : Optimizer(store, segments),
      weight_decay_(config.weight_decay),
      beta1_(config.beta1),
      beta2_(config.beta2),
      eps_(config.eps),
      chunk_sums_(2 * chunks_.size()),
      view_sums_(store),
      trust_(store.views().size(), 1.0),
      scales_(store.views().size()) {
  exp_avg_.resize(local_size());
  exp_avg_sq_.resize(local_size());
  batch_.reserve(chunks_.size());
}

void Lamb::update(const UpdateBuffers& buffers, float lr) {
  const double t = double(steps_ + 1);
  const kernels::LambStep step{.b1 = float(beta1_),
                               .one_minus_b1 = float(1.0 - beta1_),
                               .b2 = float(beta2_),
                               .one_minus_b2 = float(1.0 - beta2_),
                               .bc1 = float(1.0 - std::pow(beta1_, t)),
                               .bc2_sqrt = float(std::sqrt(1.0 - std::pow(beta2_, t))),
                               .eps = float(eps_),
                               .weight_decay = float(weight_decay_)};
  batch_.clear();
  for (const UpdateChunk& ch : chunks_.chunks)
    batch_.push_back({.param = buffers.params_of(ch),
                      .grad = buffers.grads_of(ch),
                      .m = exp_avg_.raw() + ch.local,
                      .v = exp_avg_sq_.raw() + ch.local,
                      .size = int64_t(ch.size),
                      .decays = ch.weight_decay ? 1 : 0,
                      .view = int32_t(ch.view)});

  // Pass 1: the moments and the norms, summed over the ranks where sharded.
  backend_.lamb_moments(batch_, step, chunk_sums_.data());
  const std::span<double> sums = view_sums_.add(chunks_, chunk_sums_);
  reduce_view_sums(sums);
  for (size_t v = 0; v < trust_.size(); ++v) {
    trust_[v] = 1.0;
    const double w_norm = std::sqrt(sums[2 * v]), u_norm = std::sqrt(sums[2 * v + 1]);
    if (view_sums_.decays(v) && w_norm > 0 && u_norm > 0) trust_[v] = w_norm / u_norm;
    scales_[v] = float(double(lr) * trust_[v]);
  }
  // Pass 2: apply.
  backend_.lamb_apply(batch_, scales_, step);
  ++steps_;
}

std::vector<std::pair<std::string, DeviceArray<float>*>> Lamb::state_buffers() {
  return {{"exp_avg", &exp_avg_}, {"exp_avg_sq", &exp_avg_sq_}};
}

}  // namespace meshtrain
