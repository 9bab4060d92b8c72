#include "meshtrain/kernels/bf16.hpp"

#include <omp.h>

#include "meshtrain/core/cpu_dispatch.hpp"

namespace meshtrain::kernels {
namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr size_t kMinParallelElements = size_t(1) << 16;

bool split_over_threads(size_t n) { return n >= kMinParallelElements && !omp_in_parallel(); }

}  // namespace

MESHTRAIN_HOT_LOOP
void to_bf16(const float* src, Bf16* dst, size_t n) {
  // A branch-free loop the compiler vectorises (the NaN test included).
  // Not `parallel for simd`: its chunks interleaved the threads' stores and
  // ran 10x slower on 2 threads than plain static halves (measured).
#pragma omp parallel for schedule(static) if (split_over_threads(n))
  for (size_t i = 0; i < n; ++i) dst[i] = to_bf16(src[i]);
}

Bf16* to_bf16(const float* src, size_t n, AlignedBuffer<Bf16>& dst) {
  dst.ensure(n);
  to_bf16(src, dst.data(), n);
  return dst.data();
}

MESHTRAIN_HOT_LOOP
void to_float(const Bf16* src, float* dst, size_t n) {
#pragma omp parallel for schedule(static) if (split_over_threads(n))
  for (size_t i = 0; i < n; ++i) dst[i] = to_float(src[i]);
}

MESHTRAIN_HOT_LOOP
void widen_divided(const Bf16* src, float* dst, size_t n, float divisor) {
#pragma omp parallel for schedule(static) if (split_over_threads(n))
  for (size_t i = 0; i < n; ++i) dst[i] = to_float(src[i]) / divisor;
}

}  // namespace meshtrain::kernels
