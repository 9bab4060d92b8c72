#pragma once
// exp and tanh written as straight-line float arithmetic so that GCC
// vectorizes the loops that call them (libm's expf/tanhf are opaque calls
// that keep a GELU or softmax loop scalar: ~10x slower on 1M elements).
// Accuracy: relative error below 2e-7 for exp (Cephes expf polynomial),
// absolute error below 3e-7 for tanh.
#include <bit>
#include <cstdint>

namespace meshtrain::kernels {

inline float fast_exp(float x) {
  // Clamp so 2^n stays a normal float; exp(-87.3) ~ 1e-38 stands in for 0.
  x = x < -87.3f ? -87.3f : x;
  x = x > 88.3f ? 88.3f : x;
  // x = n ln2 + r with n = round(x / ln2) (magic-constant rounding), |r| <= ln2/2.
  const float shifted = x * 1.44269504088896341f + 12582912.0f;
  const float n = shifted - 12582912.0f;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // ln2 split hi/lo
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;  // 2^n
  return er * std::bit_cast<float>(bits);
}

inline float fast_tanh(float x) {
  // tanh(x) = 1 - 2 / (exp(2x) + 1): saturates cleanly to +-1 at both ends.
  return 1.0f - 2.0f / (fast_exp(2.0f * x) + 1.0f);
}

}  // namespace meshtrain::kernels
