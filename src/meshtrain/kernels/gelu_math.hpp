#pragma once
// The GELU's scalar formulas, shared by the fp32 passes (elementwise.cpp) and
// the tables of the bf16 passes (gelu_table.cpp) and the CUDA kernels
// (kernels/cuda/gelu.cu), so that all compute the same expressions.
//
// GELU, tanh approximation (GPT-2's "gelu_new"):
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
#include "meshtrain/kernels/fast_math.hpp"

namespace meshtrain::kernels::detail {

inline constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
inline constexpr float kGeluCube = 0.044715f;

MESHTRAIN_HD float gelu_value(float x) {
  const float t = fast_tanh(kGeluScale * (x + kGeluCube * x * x * x));
  return 0.5f * x * (1.0f + t);
}

// gelu'(x). Past |x| = 10 the tanh is exactly +-1 in float and the second
// term exactly 0: x is clamped there inside the tanh and its derivative, so
// that x^3 cannot overflow into 0 * inf = NaN (|x| > ~7e12); every finite
// result keeps its bits.
MESHTRAIN_HD float gelu_slope(float x) {
  const float c = x < -10.0f ? -10.0f : (x > 10.0f ? 10.0f : x);
  const float t = fast_tanh(kGeluScale * (c + kGeluCube * c * c * c));
  const float du = kGeluScale * (1.0f + 3.0f * kGeluCube * c * c);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

}  // namespace meshtrain::kernels::detail
