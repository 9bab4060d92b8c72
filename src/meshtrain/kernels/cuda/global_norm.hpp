#pragma once
// The global gradient norm and clipping without a host round trip: the sum
// of squares lands in a device float, clip_coefficient turns it into the
// factor in another, and scale_by (or adamw_update's grad_scale) applies
// it. The host reads the sum only to log it. As optim/clip.hpp, but on the
// device.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace meshtrain::kernels::cuda {

// Scratch global_norm_squared needs: this many doubles, one per block of
// its first pass (a fixed grid, so the association depends on n alone).
inline constexpr int64_t kGlobalNormPartials = 1024;

// sumsq (1) = sum over i < n of x[i]^2, written: squares summed in double,
// per block of a fixed grid, then the blocks' sums in block order, then
// rounded to float once. Deterministic: the same x (same n, same address
// alignment) gives the same bits every run. partials: kGlobalNormPartials doubles.
void global_norm_squared(float* sumsq, double* partials, const float* x, int64_t n, cudaStream_t stream);

// coef (1) = clip_factor(sqrt(*sumsq), max_norm) (kernels/clip_math.hpp):
// min(1, max_norm / (norm + 1e-6)), 1 where the norm is not finite.
void clip_coefficient(float* coef, const float* sumsq, float max_norm, cudaStream_t stream);

// x (n) *= *factor, in place (factor a device float).
void scale_by(float* x, const float* factor, int64_t n, cudaStream_t stream);

}  // namespace meshtrain::kernels::cuda
