#include "meshtrain/nn/attention.hpp"

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/bf16.hpp"
#include "meshtrain/nn/backend.hpp"

namespace meshtrain::nn {

namespace {

// Checked before any tensor is declared, so the message names heads, not shapes.
int64_t heads_per_rank(const std::string& prefix, int64_t C, int64_t n_head, TensorParallelComm* tp) {
  if (n_head <= 0 || C % n_head != 0)
    throw Error("SelfAttention '" + prefix + "': n_embd " + std::to_string(C) + " is not divisible by n_head " +
                std::to_string(n_head));
  const int T = tp ? tp->size() : 1;
  if (n_head % T != 0)
    throw Error("SelfAttention '" + prefix + "': n_head " + std::to_string(n_head) + " is not divisible by the " +
                std::to_string(T) + " tensor-parallel ways");
  return n_head / T;
}

}  // namespace

SelfAttention::SelfAttention(ParamStore& store, const std::string& prefix, int64_t C, int64_t n_head,
                             AttentionOptions options, TensorParallelComm* tp)
    : store_(store),
      C_(C / (tp ? tp->size() : 1)),
      NH_(heads_per_rank(prefix, C, n_head, tp)),
      causal_(options.causal),
      c_attn_(store, prefix + ".c_attn", C, 3 * C, true, LinearShard::column(tp, 3)),
      c_proj_(store, prefix + ".c_proj", C, C, true, LinearShard::row(tp)) {
  saved_.kernel = options.kernel;
}

void SelfAttention::init(Rng& rng, float stddev, float proj_stddev) {
  c_attn_.init(rng, stddev);
  c_proj_.init(rng, proj_stddev);
}

float* SelfAttention::forward(const float* inp, int64_t B, int64_t T, const float* residual) {
  B_ = B;
  T_ = T;
  kernels::Backend& backend = backend_of(store_);
  if (store_.bf16_products()) {
    // The heads' products on rounded operands (kernels/attention.hpp).
    // c_attn writes q, k, v and the heads write c_proj's input only
    // rounded: no fp32 copy of either is made.
    qkv_ = nullptr;
    qkv16_.ensure(B * T * 3 * C_);
    c_attn_.forward_rounded_output(inp, B * T, qkv16_.raw());
    kernels::AttentionBf16 bf16 = bf16_operands();
    bf16.out = c_proj_.rounded_input(B * T);
    backend.attention_forward(nullptr, saved_, nullptr, B, T, C_, NH_, causal_, &bf16);
    return c_proj_.forward_rounded(B * T, residual);
  }
  qkv_ = c_attn_.forward(inp, B * T);  // (B, T, 3C)
  y_.ensure(B * T * C_);
  backend.attention_forward(y_.raw(), saved_, qkv_, B, T, C_, NH_, causal_);
  return c_proj_.forward(y_.raw(), B * T, residual);
}

void SelfAttention::backward(float* dinp, const float* dout, Workspace& ws) {
  if (B_ == 0) throw Error("SelfAttention::backward called before forward");
  kernels::Backend& backend = backend_of(store_);
  float* dqkv = Workspace::get(ws.dqkv, B_ * T_ * 3 * C_);  // (B, T, 3C)
  const bool bf16_products = store_.bf16_products();
  float* scratch = Workspace::get(ws.datt, backend.attention_backward_scratch(saved_, B_, T_, NH_, bf16_products));
  if (bf16_products) {
    // The heads read their output gradient rounded: c_proj writes it so
    // (the bits of rounding its fp32 product after).
    dy16_.ensure(B_ * T_ * C_);
    c_proj_.backward_rounded_input_grad(dy16_.raw(), dout);
    kernels::AttentionBf16 bf16 = bf16_operands();
    // The same kernel on the same rounded q, k, v: the saved state comes
    // out bit for bit as in forward.
    if (recompute_scores_) backend.attention_recompute(saved_, nullptr, B_, T_, C_, NH_, causal_, &bf16);
    bf16.out = c_proj_.rounded_input(B_ * T_);
    bf16.dout = dy16_.raw();
    backend.attention_backward(dqkv, nullptr, nullptr, saved_, nullptr, B_, T_, C_, NH_, causal_, scratch, &bf16);
  } else {
    float* dy = Workspace::get(ws.dy, B_ * T_ * C_);  // (B, T, C)
    c_proj_.backward(dy, dout);
    if (recompute_scores_) backend.attention_recompute(saved_, qkv_, B_, T_, C_, NH_, causal_);
    backend.attention_backward(dqkv, dy, y_.raw(), saved_, qkv_, B_, T_, C_, NH_, causal_, scratch);
  }
  c_attn_.backward(dinp, dqkv);
}

}  // namespace meshtrain::nn
