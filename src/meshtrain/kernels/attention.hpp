#pragma once
// Multi-head self-attention on a fused qkv projection.
//
// Dims: B batch, T sequence, C channels, NH heads, hs = C / NH head size.
// qkv (B, T, 3C) holds q, k, v side by side in each row; head h of q is
// columns [h*hs, (h+1)*hs), of k the same plus C, of v plus 2C.
// Per (b, h):  att = softmax(q k^T / sqrt(hs) [+ causal mask]),  out = att v.
// Each (b, h) is one task of a `parallel for`; inside it gemm runs on the
// calling thread, straight on the strided qkv rows (no head transposes).
#include <cstdint>

namespace meshtrain::kernels {

// out (B, T, C) and att (B, NH, T, T) are written; att (the probabilities,
// exact zeros above the diagonal when causal) is saved for backward.
void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t C,
                       int64_t NH, bool causal);

// dqkv (B, T, 3C) is written. datt (B, NH, T, T) is scratch, overwritten.
void attention_backward(float* dqkv, float* datt, const float* dout, const float* att, const float* qkv,
                        int64_t B, int64_t T, int64_t C, int64_t NH, bool causal);

}  // namespace meshtrain::kernels
