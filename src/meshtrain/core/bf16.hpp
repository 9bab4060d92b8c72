#pragma once
// bfloat16: the upper 16 bits of an IEEE fp32 (sign, the same 8 exponent
// bits, 7 stored mantissa bits), so it spans fp32's range with about 3
// decimal digits. Rounding fp32 -> bf16 is to nearest, ties to even, the
// same on every CPU (no instruction that flushes subnormals); NaN stays NaN
// (quiet). Widening bf16 -> fp32 is exact.
//
// Used by the bf16 matrix products (kernels/gemm_bf16.hpp, which also has
// the array conversions) and by gradient communication in bf16
// (parallel.reduce_dtype; comm's DataType::BF16).
#include <cstdint>

#include "meshtrain/core/hd.hpp"

namespace meshtrain {

// A distinct type so a bf16 buffer cannot be passed where uint16 data or
// fp32 elements are meant.
struct Bf16 {
  uint16_t bits;
};

MESHTRAIN_HD Bf16 to_bf16(float x) {
  uint32_t u = bit_cast_hd<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return Bf16{static_cast<uint16_t>((u >> 16) | 0x0040u)};  // quiet NaN
  // Round to nearest even: add half an ulp of bf16, less one when the kept
  // part is even, so an exact tie rounds to the even neighbour.
  u += 0x7fffu + ((u >> 16) & 1u);
  return Bf16{static_cast<uint16_t>(u >> 16)};
}

MESHTRAIN_HD float to_float(Bf16 h) { return bit_cast_hd<float>(uint32_t(h.bits) << 16); }

}  // namespace meshtrain
