#pragma once
// bfloat16: the upper 16 bits of an IEEE fp32 (sign, the same 8 exponent
// bits, 7 stored mantissa bits), so it spans fp32's range with about 3
// decimal digits. Rounding fp32 -> bf16 is to nearest, ties to even; NaN
// stays NaN (quiet). Widening bf16 -> fp32 is exact.
//
// training.precision = "bf16" (nn/precision.hpp) rounds the operands of the
// matrix products to bf16; the products themselves are exact in fp32 and
// summed in fp32 (gemm_bf16.hpp).
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace meshtrain::kernels {

// A distinct type so a bf16 buffer cannot be passed where uint16 data or
// fp32 elements are meant.
struct Bf16 {
  uint16_t bits;
};

inline Bf16 to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return Bf16{static_cast<uint16_t>((u >> 16) | 0x0040u)};  // quiet NaN
  // Round to nearest even: add half an ulp of bf16, less one when the kept
  // part is even, so an exact tie rounds to the even neighbour.
  u += 0x7fffu + ((u >> 16) & 1u);
  return Bf16{static_cast<uint16_t>(u >> 16)};
}

inline float to_float(Bf16 h) {
  const uint32_t u = uint32_t(h.bits) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// dst[i] = bf16(src[i]) for i < n. Splits large arrays over the OpenMP
// threads when called outside a parallel region.
void to_bf16(const float* src, Bf16* dst, size_t n);
// dst[i] = float(src[i]) for i < n (exact).
void to_float(const Bf16* src, float* dst, size_t n);
// rows x cols of src (row stride lds) into dst (row stride ldd).
void to_bf16_rows(const float* src, size_t lds, Bf16* dst, size_t ldd, size_t rows, size_t cols);

}  // namespace meshtrain::kernels
