#pragma once
// How kernels split work between OpenMP threads.
//
// Row kernels use `#pragma omp parallel for schedule(static)` over rows.
// Column sums (bias and norm gradients, embedding scatter-adds) would race if
// split by rows, so they split the columns instead: thread t owns a contiguous
// range of columns, rounded to 16 floats (one cache line), and walks every row.
// Each column is then summed over rows in the same order whatever the thread
// count, so results are bitwise reproducible.
#include <algorithm>
#include <cstdint>
#include <utility>

namespace meshtrain::kernels {

// Columns [begin, end) of `cols` that thread `tid` of `nthreads` owns.
inline std::pair<int64_t, int64_t> column_range(int64_t cols, int tid, int nthreads) {
  const int64_t lines = (cols + 15) / 16;
  const int64_t per = (lines + nthreads - 1) / nthreads;
  const int64_t begin = std::min(cols, tid * per * 16);
  const int64_t end = std::min(cols, (tid + 1) * per * 16);
  return {begin, end};
}

}  // namespace meshtrain::kernels
