#pragma once
// Multi-head self-attention on a fused qkv projection.
//
// Dims: B batch, T sequence, C channels, NH heads, hs = C / NH head size.
// qkv (B, T, 3C) holds q, k, v side by side in each row; head h of q is
// columns [h*hs, (h+1)*hs), of k the same plus C, of v plus 2C.
// Per (b, h):  att = softmax(q k^T / sqrt(hs) [+ causal mask]),  out = att v.
// Each (b, h) is one task of a `parallel for`; inside it gemm runs on the
// calling thread, straight on the strided qkv rows (no head transposes).
//
// bf16 products (training.precision = "bf16"): given qkv16, qkv rounded to
// bf16 (and dout16, dout rounded, in backward), the five products per head
// take bf16 operands with fp32 sums (gemm_bf16.hpp); the probabilities and
// the score gradients are rounded block by block as they enter a product.
// The scores, the softmax and its backward stay fp32.
#include <cstdint>

#include "meshtrain/kernels/bf16.hpp"

namespace meshtrain::kernels {

// out (B, T, C) and att (B, NH, T, T) are written; att (the probabilities,
// exact zeros above the diagonal when causal) is saved for backward.
void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t C,
                       int64_t NH, bool causal, const Bf16* qkv16 = nullptr);

// dqkv (B, T, 3C) is written. datt (B, NH, T, T) is scratch, overwritten.
// qkv16 and dout16 both, or neither.
void attention_backward(float* dqkv, float* datt, const float* dout, const float* att, const float* qkv,
                        int64_t B, int64_t T, int64_t C, int64_t NH, bool causal, const Bf16* qkv16 = nullptr,
                        const Bf16* dout16 = nullptr);

}  // namespace meshtrain::kernels
