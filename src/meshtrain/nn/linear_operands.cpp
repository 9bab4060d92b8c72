#include "meshtrain/nn/linear_operands.hpp"

#include "meshtrain/nn/backend.hpp"

namespace meshtrain::nn {

using kernels::Bf16;
using kernels::Trans;

void Fp32Operands::forward(float beta, float* out, const float* bias) {
  (void)bias;  // adds_bias() is false: the layer adds it
  const int m = static_cast<int>(rows_), n = static_cast<int>(out_), k = static_cast<int>(in_);
  backend_of(store_).gemm(Trans::No, Trans::No, m, n, k, 1.0f, x_, k, store_.param(weight_), n, beta, out, n);
}

void Fp32Operands::keep_output_grad(const float* dy, int64_t M, float* dbias, bool deferred) {
  if (dbias) backend_of(store_).bias_backward(dbias, dy, M, out_);
  dy_ = dy;
  if (!deferred) return;
  dy_saved_.ensure(M * out_);
  backend_of(store_).copy(dy_saved_.raw(), dy, static_cast<size_t>(M * out_));
  dy_ = dy_saved_.raw();
}

void Fp32Operands::weight_grad(float beta, float* dW) {
  const int M = static_cast<int>(rows_), in = static_cast<int>(in_), out = static_cast<int>(out_);
  backend_of(store_).gemm(Trans::Yes, Trans::No, in, out, M, 1.0f, x_, in, dy_, out, beta, dW, out);
}

void Fp32Operands::input_grad(float* dx) {
  const int M = static_cast<int>(rows_), in = static_cast<int>(in_), out = static_cast<int>(out_);
  backend_of(store_).gemm(Trans::No, Trans::Yes, M, in, out, 1.0f, dy_, out, store_.param(weight_), out, 0.0f, dx,
                          in);
}

void Bf16Operands::keep_input(const float* x, int64_t M) {
  rows_ = M;
  round_into(store_, x, static_cast<size_t>(M * in_), x16_);
}

Bf16* Bf16Operands::rounded_input(int64_t M) {
  x16_.ensure(M * in_);
  return x16_.raw();
}

void Bf16Operands::keep_weight() {
  // Rounded once a forward: backward reuses it (the weight does not change between the two).
  round_into(store_, store_.param(weight_), static_cast<size_t>(in_ * out_), weight_copy());
}

void Bf16Operands::refresh_weight() {
  // A shared copy holds another layer's weight by now: the same bits again (ZeRO-3 has gathered it).
  if (&weight_copy() != &w16_) keep_weight();
}

void Bf16Operands::forward(float beta, float* out, const float* bias) {
  const int m = static_cast<int>(rows_), n = static_cast<int>(out_), k = static_cast<int>(in_);
  backend_of(store_).gemm_bf16(Trans::No, Trans::No, m, n, k, 1.0f, x16_.raw(), k, weight_copy().raw(), n, beta, out,
                               n, bias);
}

void Bf16Operands::forward_rounded(Bf16* out16, const float* bias) {
  const int m = static_cast<int>(rows_), n = static_cast<int>(out_), k = static_cast<int>(in_);
  backend_of(store_).gemm_bf16_rounded(Trans::No, Trans::No, m, n, k, x16_.raw(), k, weight_copy().raw(), n, out16,
                                       n, bias);
}

Bf16* Bf16Operands::rounded_output_grad(int64_t M, bool deferred) {
  // A deferred weight gradient reads it later: the layer's own buffer then.
  DeviceArray<Bf16>& rounded = deferred || !dy16_scratch_ ? dy16_ : *dy16_scratch_;
  rounded.ensure(M * out_);
  dy16_ready_ = rounded.raw();
  return dy16_ready_;
}

void Bf16Operands::keep_output_grad(const float* dy, int64_t M, float* dbias, bool deferred) {
  // Rounded once for both products, in the same pass as the bias gradient.
  Bf16* dy16 = rounded_output_grad(M, deferred);
  if (dbias)
    backend_of(store_).bias_backward_rounded(dbias, dy16, dy, M, out_);
  else
    backend_of(store_).to_bf16(dy, dy16, static_cast<size_t>(M * out_));
}

void Bf16Operands::weight_grad(float beta, float* dW) {
  const int M = static_cast<int>(rows_), in = static_cast<int>(in_), out = static_cast<int>(out_);
  backend_of(store_).gemm_bf16(Trans::Yes, Trans::No, in, out, M, 1.0f, x16_.raw(), in, dy16_ready_, out, beta, dW,
                               out);
}

void Bf16Operands::input_grad(float* dx) {
  const int M = static_cast<int>(rows_), in = static_cast<int>(in_), out = static_cast<int>(out_);
  backend_of(store_).gemm_bf16(Trans::No, Trans::Yes, M, in, out, 1.0f, dy16_ready_, out, weight_copy().raw(), out,
                               0.0f, dx, in);
}

void Bf16Operands::input_grad_rounded(Bf16* dx16) {
  const int M = static_cast<int>(rows_), in = static_cast<int>(in_), out = static_cast<int>(out_);
  backend_of(store_).gemm_bf16_rounded(Trans::No, Trans::Yes, M, in, out, dy16_ready_, out, weight_copy().raw(), out,
                                       dx16, in);
}

void Bf16Operands::share_input_and_weight(SharedActivations& pool, const std::string& key) {
  x16_.share(&pool.get_bf16(key + ".in16"));
  w16_.share(&pool.get_bf16(key + ".w16", MemoryKind::WeightCopies));
}

void Bf16Operands::share_scratch(SharedActivations& pool) {
  dy16_scratch_ = &pool.get_bf16("linear.dout16");
  w16_scratch_ = &pool.get_bf16("linear.w16", MemoryKind::WeightCopies);
}

}  // namespace meshtrain::nn
