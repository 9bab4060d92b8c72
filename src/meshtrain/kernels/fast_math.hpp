#pragma once
// exp and tanh written as straight-line float arithmetic so that GCC
// vectorizes the loops that call them (libm's expf/tanhf are opaque calls
// that keep a GELU or softmax loop scalar: ~10x slower on 1M elements).
// Accuracy: relative error below 2e-7 for exp (Cephes expf polynomial),
// absolute error below 3e-7 for tanh. Host and device (core/hd.hpp): the
// CUDA GELU computes the same bits.
#include <cstdint>

#include "meshtrain/core/hd.hpp"

namespace meshtrain::kernels {

// The Cephes expf constants, shared with the AVX-512 softmax
// (attention_softmax_avx512.cpp): log2(e); ln 2 split as kLn2Hi - kLn2Lo,
// kLn2Hi exact in few bits so n kLn2Hi is exact; e^r ~ 1 + r + r^2 p(r)
// with p's coefficients from the highest power down.
namespace cephes_exp {
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = 2.12194440e-4f;
// Scalars for device code (nvcc cannot read a namespace-scope array there);
// kPoly lists them for the AVX-512 loop.
inline constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                       kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;
inline constexpr float kPoly[6] = {kP0, kP1, kP2, kP3, kP4, kP5};
}  // namespace cephes_exp

MESHTRAIN_HD float fast_exp(float x) {
  using namespace cephes_exp;
  // Clamp so 2^n stays a normal float; exp(-87.3) ~ 1e-38 stands in for 0.
  x = x < -87.3f ? -87.3f : x;
  x = x > 88.3f ? 88.3f : x;
  // x = n ln2 + r with n = round(x / ln2) (magic-constant rounding), |r| <= ln2/2.
  const float shifted = x * kLog2e + 12582912.0f;
  const float n = shifted - 12582912.0f;
  const float r = (x - n * kLn2Hi) + n * kLn2Lo;
  float p = kP0;
  p = p * r + kP1;
  p = p * r + kP2;
  p = p * r + kP3;
  p = p * r + kP4;
  p = p * r + kP5;
  const float er = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;  // 2^n
  return er * bit_cast_hd<float>(bits);
}

MESHTRAIN_HD float fast_tanh(float x) {
  // tanh(x) = 1 - 2 / (exp(2x) + 1): saturates cleanly to +-1 at both ends.
  return 1.0f - 2.0f / (fast_exp(2.0f * x) + 1.0f);
}

}  // namespace meshtrain::kernels
