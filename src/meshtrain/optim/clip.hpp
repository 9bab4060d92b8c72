#pragma once
// Global-norm gradient clipping, as torch.nn.utils.clip_grad_norm_:
//   norm = ||g||_2 over the whole flat gradient buffer
//   if norm > max_norm: g *= max_norm / (norm + 1e-6)
//
// The norm is reproducible bit for bit (kernels/norm.hpp says how). ZeRO
// ranks call squared_norm_range on their shard, all-reduce the sums, then
// clip_coefficient and scale_range.
#include <cstddef>
#include <span>

#include "meshtrain/core/param_store.hpp"
#include "meshtrain/kernels/norm.hpp"

namespace meshtrain {

using kernels::kNormChunkElems;

// Sum of x[i]^2 for i in [begin, end), in double. Throws Error if the range
// is outside x. Allocates only when a larger range than ever before is seen
// on this thread (a grow-only scratch of one double per chunk).
double squared_norm_range(std::span<const float> x, size_t begin, size_t end);

// The factor to multiply gradients by: min(1, max_norm / (norm + 1e-6)).
// 1 when norm is not finite, so the caller can see the norm and skip the step
// instead of spreading NaN through every gradient.
float clip_coefficient(double norm, float max_norm);

// x[i] *= factor for i in [begin, end); OpenMP-parallel.
void scale_range(std::span<float> x, size_t begin, size_t end, float factor);

// Clips the store's gradients to global norm max_norm (> 0) and returns the
// norm before clipping. On the store's device, through its backend (one
// wait for the norm off the CPU).
float clip_grad_norm(ParamStore& store, float max_norm);
// The sum of the squares of the store's whole gradient buffer, on its device.
double grad_squared_norm(ParamStore& store);

}  // namespace meshtrain
