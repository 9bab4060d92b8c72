#include "meshtrain/kernels/norm.hpp"

#include <algorithm>

#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/cpu_dispatch.hpp"

namespace meshtrain::kernels {

MESHTRAIN_HOT_LOOP
double sum_squares(const float* x, size_t n) {
  // Eight independent accumulators let the compiler vectorize without
  // -ffast-math while keeping the association fixed.
  constexpr size_t kLanes = kSquaresLanes;
  double lane[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) lane[j] += double(x[i + j]) * double(x[i + j]);
  for (size_t j = 0; i < n; ++i, ++j) lane[j] += double(x[i]) * double(x[i]);
  return add_lanes(lane);
}

double squared_norm(const float* base, size_t begin, size_t end) {
  if (begin >= end) return 0;
  // Chunks: [begin, first boundary), then whole kNormChunkElems blocks at
  // absolute offsets, then the tail.
  const size_t first_block = begin / kNormChunkElems;
  const size_t n_chunks = (end - 1) / kNormChunkElems - first_block + 1;
  thread_local AlignedBuffer<double> partial(MemoryKind::Other);
  if (partial.size() < n_chunks) partial.ensure(n_chunks);
  double* part = partial.data();
#pragma omp parallel for schedule(static)
  for (long c = 0; c < long(n_chunks); ++c) {
    const size_t lo = std::max(begin, (first_block + size_t(c)) * kNormChunkElems);
    const size_t hi = std::min(end, (first_block + size_t(c) + 1) * kNormChunkElems);
    part[c] = sum_squares(base + lo, hi - lo);
  }
  double sum = 0;
  for (size_t c = 0; c < n_chunks; ++c) sum += part[c];
  return sum;
}

MESHTRAIN_HOT_LOOP
void scale(float* x, size_t n, float factor) {
  const long count = long(n);
#pragma omp parallel for schedule(static)
  for (long i = 0; i < count; ++i) x[i] *= factor;
}

}  // namespace meshtrain::kernels
