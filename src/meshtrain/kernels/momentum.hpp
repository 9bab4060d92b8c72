#pragma once
// SGD's and LARS's update on the CPU (backend.hpp's momentum_squares and
// momentum_update): each chunk through momentum_math.hpp's element step,
// chunks split over the OpenMP threads. Chunk boundaries never depend on the
// thread count, so neither do the bits.
#include <span>

#include "meshtrain/kernels/momentum_math.hpp"

namespace meshtrain::kernels {

// sums[2c] and sums[2c + 1]: the sums of squares of chunk c's parameters
// and gradients (norm.hpp's sum_squares); 0 for a chunk that does not decay
// (LARS leaves its view unadapted).
void momentum_squares(std::span<const MomentumChunk> chunks, double* sums);

// Every chunk's update; trusts: one per view (LARS), or null for 1 (SGD).
void momentum_update(std::span<const MomentumChunk> chunks, const float* trusts, const MomentumStep& step);

}  // namespace meshtrain::kernels
