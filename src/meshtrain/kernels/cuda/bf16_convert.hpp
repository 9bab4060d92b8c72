#pragma once
// Array conversions between fp32 and bf16 on the GPU, with core/bf16.hpp's
// scalar conversions (round to nearest even, NaN kept quiet; widening
// exact): the bits of kernels::to_bf16 / kernels::to_float (kernels/bf16.hpp).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "meshtrain/core/bf16.hpp"

namespace meshtrain::kernels::cuda {

// dst (n) = bf16(src (n)).
void to_bf16(const float* src, Bf16* dst, int64_t n, cudaStream_t stream);
// dst (n) = float(src (n)), exact.
void to_float(const Bf16* src, float* dst, int64_t n, cudaStream_t stream);
// dst (n) = float(src (n)) / divisor, IEEE division: kernels::widen_divided's bits.
void widen_divided(const Bf16* src, float* dst, int64_t n, float divisor, cudaStream_t stream);

}  // namespace meshtrain::kernels::cuda
