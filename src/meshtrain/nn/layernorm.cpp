#include "meshtrain/nn/layernorm.hpp"

#include "meshtrain/core/error.hpp"
#include "meshtrain/nn/backend.hpp"
#include "meshtrain/nn/init.hpp"

namespace meshtrain::nn {

LayerNorm::LayerNorm(ParamStore& store, const std::string& prefix, int64_t C, TensorParallelComm* tp)
    : store_(store), C_(C), seq_tp_(sequence_parallel(tp) ? tp : nullptr) {
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
  backend_of(store_).layernorm_forward(out_.raw(), mean_.raw(), rstd_.raw(), inp, store_.param(weight_),
                                       store_.param(bias_), N, C_);
  return out_.raw();
}

void LayerNorm::forward_rounded(const float* inp, int64_t N, Bf16* out16) {
  mean_.ensure(N);
  rstd_.ensure(N);
  inp_ = inp;
  N_ = N;
  backend_of(store_).layernorm_forward_rounded(out16, mean_.raw(), rstd_.raw(), inp, store_.param(weight_),
                                               store_.param(bias_), N, C_);
}

void LayerNorm::backward(float* dinp, const float* dout, const float* dresid) {
  if (!inp_) throw Error("LayerNorm::backward called before forward");
  if (!seq_tp_) {
    backend_of(store_).layernorm_backward(dinp, store_.grad(weight_), store_.grad(bias_), dout, inp_,
                                          store_.param(weight_), mean_.raw(), rstd_.raw(), dresid, N_, C_);
  } else {
    dpartial_.ensure(2 * C_);
    float* dweight = dpartial_.raw();  // (C), then dbias (C)
    backend_of(store_).fill(dweight, static_cast<size_t>(2 * C_), 0.0f);
    backend_of(store_).layernorm_backward(dinp, dweight, dweight + C_, dout, inp_, store_.param(weight_), mean_.raw(),
                                          rstd_.raw(), dresid, N_, C_);
    seq_tp_->all_reduce_sum_fp32(dweight, static_cast<size_t>(2 * C_));
    backend_of(store_).residual_forward(store_.grad(weight_), store_.grad(weight_), dweight, C_);
    backend_of(store_).residual_forward(store_.grad(bias_), store_.grad(bias_), dweight + C_, C_);
  }
  store_.grad_ready(weight_);
  store_.grad_ready(bias_);
}

}  // namespace meshtrain::nn
