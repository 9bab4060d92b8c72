#pragma once
// Sums of squares and scaling of flat fp32 ranges: the gradient norm and its
// clipping (optim/clip.hpp), the gradient's averaging over micro-batches.
//
// Reproducible bit for bit: a range is cut into chunks at multiples of
// kNormChunkElems counted from the buffer's start, each chunk's sum of
// squares is taken in double with a fixed association (sum_squares), and the
// chunk sums are added in chunk order, whatever the thread count. A shard
// that starts on a chunk boundary sees the chunks the whole buffer sees.
#include <cstddef>

namespace meshtrain::kernels {

inline constexpr size_t kNormChunkElems = 4096;
// sum_squares's association: element i adds into lane i % kSquaresLanes, in
// order; the lanes are then added in lane order. The optimizers' per-chunk
// norms (momentum.hpp, lamb.hpp) and the CUDA twins (a thread per lane) sum
// the same way.
inline constexpr size_t kSquaresLanes = 8;

// Sum of x[i]^2 in double with that fixed association, so the same n values
// always give the same bits.
double sum_squares(const float* x, size_t n);

// The lanes' sums added in lane order: the association's last step.
inline double add_lanes(const double (&lane)[kSquaresLanes]) {
  double s = 0;
  for (size_t j = 0; j < kSquaresLanes; ++j) s += lane[j];
  return s;
}

// Sum of base[i]^2 for i in [begin, end), chunked from base (header
// comment). Allocates only when a larger range than ever before is seen on
// this thread (a grow-only scratch of one double per chunk).
double squared_norm(const float* base, size_t begin, size_t end);

// x[i] *= factor for i < n; OpenMP-parallel.
void scale(float* x, size_t n, float factor);

// sums[p] = x[p n] + ... + x[p n + n - 1] in double, in that order, for
// each of `parts` runs of n host floats (Backend::sums_in_order: the CPU's,
// and a GPU's on its download; inline, so the CUDA library needs no link to
// this one).
inline void sums_in_order(const float* x, size_t n, size_t parts, double* sums) {
  for (size_t p = 0; p < parts; ++p) {
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += x[p * n + i];
    sums[p] = sum;
  }
}

}  // namespace meshtrain::kernels
