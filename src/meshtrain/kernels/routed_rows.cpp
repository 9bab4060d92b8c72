#include "meshtrain/kernels/routed_rows.hpp"

#include <cstring>

#include "meshtrain/kernels/routed_rows_math.hpp"

namespace meshtrain::kernels {

void gather_rows(float* dst, const float* src, const int32_t* rows, int64_t n, int64_t C) {
#pragma omp parallel for schedule(static) if (n * C > (1 << 16))
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(dst + i * C, src + int64_t(rows[i]) * C, size_t(C) * sizeof(float));
}

// Row by row, so that the inner loop over columns vectorises; each element
// still sees base, then each term in j order (the CUDA kernel's order).
void combine_rows(float* out, const float* base, const float* src, const int32_t* offsets, const int32_t* rows,
                  const float* scales, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static) if (N * C > (1 << 16))
  for (int64_t t = 0; t < N; ++t) {
    float* o = out + t * C;
    if (base)
      std::memmove(o, base + t * C, size_t(C) * sizeof(float));
    else
      std::memset(o, 0, size_t(C) * sizeof(float));
    for (int32_t j = offsets[t]; j < offsets[t + 1]; ++j) {
      const float* y = src + int64_t(rows[j]) * C;
      for (int64_t c = 0; c < C; ++c) o[c] = add_scaled(o[c], scales, rows[j], y[c]);
    }
  }
}

void gate_backward_rows(float* dy, float* dgates, const float* dout, const float* y, const int32_t* tokens,
                        const float* gates, int64_t n, int64_t C) {
#pragma omp parallel for schedule(static) if (n * C > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    const float* d = dout + int64_t(tokens[i]) * C;
    dgates[i] = gate_gradient(d, y + i * C, C);
    for (int64_t c = 0; c < C; ++c) dy[i * C + c] = gates[i] * d[c];
  }
}

}  // namespace meshtrain::kernels
