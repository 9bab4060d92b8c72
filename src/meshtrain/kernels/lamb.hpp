#pragma once
// LAMB's two passes on the CPU (backend.hpp's lamb_moments and lamb_apply):
// each chunk through lamb_math.hpp's element steps, chunks split over the
// OpenMP threads. Chunk boundaries never depend on the thread count, so
// neither do the bits.
#include <span>

#include "meshtrain/kernels/lamb_math.hpp"

namespace meshtrain::kernels {

// Pass 1: every chunk's moments, then sums[2c] and sums[2c + 1], the sums of
// squares of chunk c's parameters and of its directions u (in norm.hpp's
// lane association, so a GPU's lanes give the same bits).
void lamb_moments(std::span<const LambChunk> chunks, const LambStep& step, double* sums);

// Pass 2: w -= scales[view] * u, u recomputed from m, v and w as pass 1 had it.
void lamb_apply(std::span<const LambChunk> chunks, const float* scales, const LambStep& step);

}  // namespace meshtrain::kernels
