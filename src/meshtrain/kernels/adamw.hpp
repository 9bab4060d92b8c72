#pragma once
// AdamW's update on the CPU: each chunk (backend.hpp's AdamWChunk) through
// adamw_math.hpp's element step, chunks split over the OpenMP threads. The
// chunk boundaries never depend on the thread count, so neither do the bits.
#include <span>

#include "meshtrain/kernels/backend.hpp"

namespace meshtrain::kernels {

void adamw_update(std::span<const AdamWChunk> chunks, const AdamWStep& step);

}  // namespace meshtrain::kernels
