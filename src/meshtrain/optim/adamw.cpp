#include "meshtrain/optim/adamw.hpp"

#include <cmath>

#include "meshtrain/core/cpu_dispatch.hpp"
#include "meshtrain/kernels/adamw_math.hpp"

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

namespace {

using kernels::AdamWStep;

// One chunk's update. Four distinct buffers: __restrict lets the compiler
// vectorize the loop (sqrt and division included; IEEE-exact, so results are
// unchanged). A free function: a virtual one cannot carry clones.
MESHTRAIN_HOT_LOOP
void adamw_chunk(float* __restrict w, const float* __restrict g, float* __restrict m, float* __restrict v, size_t n,
                 float decay, const AdamWStep& s) {
  for (size_t i = 0; i < n; ++i) kernels::adamw_element(w[i], g[i], m[i], v[i], decay, s);
}

}  // namespace

void AdamW::update(const UpdateBuffers& buffers, float lr) {
  const double t = double(steps_ + 1);
  const AdamWStep s{.decay_factor = float(1.0 - double(lr) * weight_decay_),
                    .one_minus_b1 = float(1.0 - beta1_),
                    .b2 = float(beta2_),
                    .one_minus_b2 = float(1.0 - beta2_),
                    .step_size = float(double(lr) / (1.0 - std::pow(beta1_, t))),
                    .bc2_sqrt = float(std::sqrt(1.0 - std::pow(beta2_, t))),
                    .eps = float(eps_)};
  const long n_chunks = long(chunks_.size());
#pragma omp parallel for schedule(static)
  for (long c = 0; c < n_chunks; ++c) {
    const UpdateChunk& ch = chunks_.chunks[size_t(c)];
    adamw_chunk(buffers.params_of(ch), buffers.grads_of(ch), exp_avg_.data() + ch.local, exp_avg_sq_.data() + ch.local,
                ch.size, ch.weight_decay ? s.decay_factor : 1.0f, s);
  }
  ++steps_;
}

std::vector<std::pair<std::string, AlignedBuffer<float>*>> AdamW::state_buffers() {
  return {{"exp_avg", &exp_avg_}, {"exp_avg_sq", &exp_avg_sq_}};
}

}  // namespace meshtrain
