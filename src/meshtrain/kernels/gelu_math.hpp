#pragma once
// The GELU's scalar formulas, shared by the fp32 passes (elementwise.cpp) and
// the tables of the bf16 passes (gelu_table.cpp), so that both compute the
// same expressions. Internal to kernels/.
//
// GELU, tanh approximation (GPT-2's "gelu_new"):
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
#include "meshtrain/kernels/fast_math.hpp"

namespace meshtrain::kernels::detail {

inline constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
inline constexpr float kGeluCube = 0.044715f;

inline float gelu_value(float x) {
  const float t = fast_tanh(kGeluScale * (x + kGeluCube * x * x * x));
  return 0.5f * x * (1.0f + t);
}

// gelu'(x).
inline float gelu_slope(float x) {
  const float t = fast_tanh(kGeluScale * (x + kGeluCube * x * x * x));
  const float du = kGeluScale * (1.0f + 3.0f * kGeluCube * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

}  // namespace meshtrain::kernels::detail
