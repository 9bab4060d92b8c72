#pragma once
// The arithmetic of a mixture-of-experts layer's row moves
// (kernels/routed_rows.hpp), shared by the CPU (routed_rows.cpp) and CUDA
// (cuda/routed_rows.cu) so that both give the same bits: each output
// element is built by the same operations in the same order.
#include <cstdint>

#include "meshtrain/core/hd.hpp"

namespace meshtrain::kernels {

// One term of a combine: acc + the source row's scale times y, or acc + y
// without scales (a multiplication by 1 would give the same bits; skipping
// it is cheaper).
MESHTRAIN_HD float add_scaled(float acc, const float* scales, int32_t row, float y) {
  return scales ? acc + scales[row] * y : acc + y;
}

// A gate's gradient: the dot product of the combined output's gradient
// row and its expert's output row, summed in double in column order (each
// product of two floats is exact in double).
MESHTRAIN_HD float gate_gradient(const float* dout_row, const float* y_row, int64_t C) {
  double dot = 0;
  for (int64_t c = 0; c < C; ++c) dot += double(dout_row[c]) * double(y_row[c]);
  return float(dot);
}

}  // namespace meshtrain::kernels
