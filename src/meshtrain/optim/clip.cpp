#include "meshtrain/optim/clip.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/cpu_dispatch.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/optim/chunks.hpp"

namespace meshtrain {

double squared_norm_range(std::span<const float> x, size_t begin, size_t end) {
  if (begin > end || end > x.size())
    throw Error("squared_norm_range: range [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") outside a buffer of " + std::to_string(x.size()) + " elements");
  if (begin == end) return 0;
  // Chunks: [begin, first boundary), then whole kNormChunkElems blocks at
  // absolute offsets, then the tail. Absolute boundaries mean a shard that
  // starts on a boundary sees the same chunks as the whole buffer does.
  const size_t first_block = begin / kNormChunkElems;
  const size_t n_chunks = (end - 1) / kNormChunkElems - first_block + 1;
  thread_local AlignedBuffer<double> partial(MemoryKind::Other);
  if (partial.size() < n_chunks) partial.ensure(n_chunks);
  double* part = partial.data();
  const float* data = x.data();
#pragma omp parallel for schedule(static)
  for (long c = 0; c < long(n_chunks); ++c) {
    const size_t lo = std::max(begin, (first_block + size_t(c)) * kNormChunkElems);
    const size_t hi = std::min(end, (first_block + size_t(c) + 1) * kNormChunkElems);
    part[c] = sum_squares(data + lo, hi - lo);
  }
  double sum = 0;
  for (size_t c = 0; c < n_chunks; ++c) sum += part[c];
  return sum;
}

float clip_coefficient(double norm, float max_norm) {
  if (!std::isfinite(norm)) return 1.0f;
  return float(std::min(1.0, double(max_norm) / (norm + 1e-6)));
}

MESHTRAIN_HOT_LOOP
void scale_range(std::span<float> x, size_t begin, size_t end, float factor) {
  if (begin > end || end > x.size())
    throw Error("scale_range: range [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") outside a buffer of " + std::to_string(x.size()) + " elements");
  float* data = x.data();
  const long n = long(end - begin);
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) data[begin + size_t(i)] *= factor;
}

float clip_grad_norm(ParamStore& store, float max_norm) {
  if (!(max_norm > 0)) throw Error("clip_grad_norm: max_norm must be > 0, got " + std::to_string(max_norm));
  auto grads = store.grads();
  const double norm = std::sqrt(squared_norm_range(grads, 0, grads.size()));
  const float coef = clip_coefficient(norm, max_norm);
  if (coef < 1.0f) scale_range(grads, 0, grads.size(), coef);
  return float(norm);
}

}  // namespace meshtrain
