#pragma once
// Layer normalization over the last dim of N rows of C floats:
//   out = (x - mean) * rstd * weight + bias,  rstd = 1 / sqrt(var + 1e-5)
// (biased variance, eps 1e-5: the GPT-2 / PyTorch definition).
#include <cstdint>

#include "meshtrain/core/bf16.hpp"

namespace meshtrain::kernels {

inline constexpr float kLayerNormEps = 1e-5f;

// out (N, C), mean (N), rstd (N) are written; mean and rstd are saved for backward.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t N, int64_t C);
// The same with out written only rounded to bf16 (the bits of rounding
// layernorm_forward's out): a bf16 linear layer's input.
void layernorm_forward_rounded(Bf16* out16, float* mean, float* rstd, const float* inp, const float* weight,
                               const float* bias, int64_t N, int64_t C);

// dinp (N, C) = dresid + dLN/dinp, written. dresid may be null (then dinp is
// just the layer's gradient) or alias dinp: it fuses the residual branch's
// gradient into this pass. dweight, dbias (C) are accumulated (+=).
// dout must not alias dinp.
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, const float* dresid,
                        int64_t N, int64_t C);

}  // namespace meshtrain::kernels
