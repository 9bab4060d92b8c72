#include "meshtrain/nn/layernorm.hpp"

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/layernorm.hpp"
#include "meshtrain/nn/init.hpp"

namespace meshtrain::nn {

LayerNorm::LayerNorm(ParamStore& store, const std::string& prefix, int64_t C) : store_(store), C_(C) {
  if (C <= 0) throw Error("LayerNorm '" + prefix + "': C must be positive, got " + std::to_string(C));
  weight_ = store.declare(prefix + ".weight", {C}, false);
  bias_ = store.declare(prefix + ".bias", {C}, false);
}

void LayerNorm::init() {
  fill_constant(store_.param(weight_), C_, 1.0f);
  fill_constant(store_.param(bias_), C_, 0.0f);
}

float* LayerNorm::forward(const float* inp, int64_t N) {
  out_.ensure(N * C_);
  mean_.ensure(N);
  rstd_.ensure(N);
  inp_ = inp;
  N_ = N;
  kernels::layernorm_forward(out_.data(), mean_.data(), rstd_.data(), inp, store_.param(weight_),
                             store_.param(bias_), N, C_);
  return out_.data();
}

void LayerNorm::backward(float* dinp, const float* dout, const float* dresid) {
  if (!inp_) throw Error("LayerNorm::backward called before forward");
  kernels::layernorm_backward(dinp, store_.grad(weight_), store_.grad(bias_), dout, inp_, store_.param(weight_),
                              mean_.data(), rstd_.data(), dresid, N_, C_);
  store_.grad_ready(weight_);
  store_.grad_ready(bias_);
}

}  // namespace meshtrain::nn
