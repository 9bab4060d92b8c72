#pragma once
// Array conversions between fp32 and bf16 (the type and its scalar
// conversions: core/bf16.hpp).
//
// training.precision = "bf16" (core/precision.hpp) rounds the operands of
// the matrix products to bf16; the products themselves are exact in fp32 and
// summed in fp32 (gemm_bf16.hpp).
#include <cstddef>

#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/bf16.hpp"

namespace meshtrain::kernels {

using meshtrain::Bf16;
using meshtrain::to_bf16;
using meshtrain::to_float;

// dst[i] = bf16(src[i]) for i < n. Splits large arrays over the OpenMP
// threads when called outside a parallel region.
void to_bf16(const float* src, Bf16* dst, size_t n);
// dst sized to n and filled with bf16(src[0..n)); returns dst's data. The
// layers keep their rounded operands in such buffers.
Bf16* to_bf16(const float* src, size_t n, AlignedBuffer<Bf16>& dst);
// dst[i] = float(src[i]) for i < n (exact).
void to_float(const Bf16* src, float* dst, size_t n);
// dst[i] = float(src[i]) / divisor for i < n (a bf16 sum, averaged).
void widen_divided(const Bf16* src, float* dst, size_t n, float divisor);

}  // namespace meshtrain::kernels
