#include "meshtrain/nn/mlp.hpp"

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/bf16.hpp"
#include "meshtrain/kernels/elementwise.hpp"
#include "meshtrain/nn/backend.hpp"

namespace meshtrain::nn {

Mlp::Mlp(ParamStore& store, const std::string& prefix, int64_t C, TensorParallelComm* tp)
    : store_(store),
      C_(C),
      c_fc_(store, prefix + ".c_fc", C, 4 * C, true, LinearShard::column(tp)),
      c_proj_(store, prefix + ".c_proj", 4 * C, C, true, LinearShard::row(tp)) {}

void Mlp::init(Rng& rng, float stddev, float proj_stddev) {
  c_fc_.init(rng, stddev);
  c_proj_.init(rng, proj_stddev);
}

float* Mlp::forward(const float* inp, int64_t N, const float* residual) {
  N_ = N;
  const int64_t H = c_fc_.out_features();  // 4C, or this rank's 4C/T
  if (store_.bf16_products()) {
    gelu_rounded(inp, N);
    return c_proj_.forward_rounded(N, residual);
  }
  h_ = c_fc_.forward(inp, N);  // (N, H)
  gelu_.ensure(N * H);
  backend_of(store_).gelu_forward(gelu_.raw(), h_, N * H);
  return c_proj_.forward(gelu_.raw(), N, residual);
}

float* Mlp::forward_into(const float* inp, int64_t N, float* h, float* gelu, float* out) {
  N_ = N;
  const int64_t H = c_fc_.out_features();
  if (store_.bf16_products()) {
    gelu_rounded(inp, N);
    return c_proj_.forward_rounded_into(N, out);
  }
  h_ = c_fc_.forward_into(inp, N, h);
  backend_of(store_).gelu_forward(gelu, h_, N * H);
  return c_proj_.forward_into(gelu, N, out);
}

void Mlp::gelu_rounded(const float* inp, int64_t N) {
  const int64_t H = c_fc_.out_features();
  h_ = nullptr;
  h16_.ensure(N * H);
  c_fc_.forward_rounded_output(inp, N, h16_.raw());
  backend_of(store_).gelu_forward_bf16(c_proj_.rounded_input(N), h16_.raw(), N * H);
}

void Mlp::recompute_gelu() {
  if (!gelu_recomputed_ || replayed_) return;
  backend_of(store_).gelu_forward_bf16(c_proj_.rounded_input(N_), h16_.raw(), N_ * c_fc_.out_features());
}

void Mlp::backward(float* dinp, const float* dout, Workspace& ws) {
  if (N_ == 0) throw Error("Mlp::backward called before forward");
  const int64_t H = c_fc_.out_features();
  if (store_.bf16_products()) {
    // The GELU's output gradient made only in bf16 (as the gradient of a
    // bf16 activation under PyTorch's autocast); the GELU's backward writes
    // c_fc's rounded dout and adds its bias gradient: no fp32 copy of
    // either gradient is written and read back.
    Bf16* dh16 = Workspace::get(ws.dh16, N_ * H);
    if (!weights_deferred_) recompute_gelu();
    c_proj_.backward_rounded_input_grad(dh16, dout);
    backend_of(store_).gelu_backward_rounded(c_fc_.rounded_output_grad(N_), c_fc_.bias_grad(), h16_.raw(), dh16, N_,
                                             H);
    c_fc_.backward_rounded(dinp);
    return;
  }
  float* dh = Workspace::get(ws.dh, N_ * H);  // (N, H): d gelu output, then d pre-activation in place
  c_proj_.backward(dh, dout);
  backend_of(store_).gelu_backward(dh, h_, dh, N_ * H);
  c_fc_.backward(dinp, dh);
}

}  // namespace meshtrain::nn
