#include "meshtrain/kernels/bf16.hpp"

#include <omp.h>

namespace meshtrain::kernels {
namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr size_t kMinParallelElements = size_t(1) << 16;

bool split_over_threads(size_t n) { return n >= kMinParallelElements && !omp_in_parallel(); }

}  // namespace

void to_bf16(const float* src, Bf16* dst, size_t n) {
  // A branch-free loop the compiler vectorises (the NaN test included).
#pragma omp parallel for simd schedule(static) if (split_over_threads(n))
  for (size_t i = 0; i < n; ++i) dst[i] = to_bf16(src[i]);
}

void to_float(const Bf16* src, float* dst, size_t n) {
#pragma omp parallel for simd schedule(static) if (split_over_threads(n))
  for (size_t i = 0; i < n; ++i) dst[i] = to_float(src[i]);
}

void to_bf16_rows(const float* src, size_t lds, Bf16* dst, size_t ldd, size_t rows, size_t cols) {
#pragma omp parallel for schedule(static) if (split_over_threads(rows * cols))
  for (size_t r = 0; r < rows; ++r) {
    const float* s = src + r * lds;
    Bf16* d = dst + r * ldd;
#pragma omp simd
    for (size_t c = 0; c < cols; ++c) d[c] = to_bf16(s[c]);
  }
}

}  // namespace meshtrain::kernels
