// Flash attention's row passes (see flash_attention_rows.hpp).
#include "meshtrain/kernels/flash_attention_rows.hpp"

#include <cmath>

#include "meshtrain/core/cpu_dispatch.hpp"
#include "meshtrain/kernels/fast_math.hpp"

namespace meshtrain::kernels::flash_detail {

MESHTRAIN_HOT_LOOP
void online_softmax_block(float* s, int64_t ld, int64_t rows, int64_t nk, int64_t r0, int64_t j0, bool causal,
                          float* m, float* l, float* acc, int64_t hs, Bf16* p16) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = s + r * ld;
    const int64_t n = visible_keys(r0 + r, j0, nk, causal);
    float mx = m[r];
    for (int64_t j = 0; j < n; ++j) mx = row[j] > mx ? row[j] : mx;
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) {
      row[j] = fast_exp(row[j] - mx);
      sum += row[j];
    }
    for (int64_t j = n; j < nk; ++j) row[j] = 0;
    if (p16)
      for (int64_t j = 0; j < nk; ++j) p16[r * ld + j] = to_bf16(row[j]);
    if (n == 0) continue;
    // The first block a row sees has nothing to rescale (m was -inf).
    const float corr = std::isinf(m[r]) ? 0.0f : fast_exp(m[r] - mx);
    l[r] = l[r] * corr + sum;
    m[r] = mx;
    if (corr != 1.0f)
      for (int64_t c = 0; c < hs; ++c) acc[r * hs + c] *= corr;
  }
}

MESHTRAIN_HOT_LOOP
void finish_rows(const float* acc, const float* m, const float* l, int64_t rows, int64_t r0, int64_t hs, int64_t C,
                 float* out, Bf16* out16, float* lse) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = r0 + r;
    const float inv = 1.0f / l[r];
    lse[t] = m[r] + std::log(l[r]);
    const float* a = acc + r * hs;
    if (out16) {
      for (int64_t c = 0; c < hs; ++c) out16[t * C + c] = to_bf16(a[c] * inv);
    } else {
      for (int64_t c = 0; c < hs; ++c) out[t * C + c] = a[c] * inv;
    }
  }
}

MESHTRAIN_HOT_LOOP
void probabilities_block(float* s, int64_t ld, int64_t rows, int64_t nk, int64_t r0, int64_t j0, bool causal,
                         const float* lse, Bf16* p16) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = s + r * ld;
    const int64_t n = visible_keys(r0 + r, j0, nk, causal);
    const float shift = lse[r0 + r];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) row[j] = fast_exp(row[j] - shift);
    for (int64_t j = n; j < nk; ++j) row[j] = 0;
    if (p16)
      for (int64_t j = 0; j < nk; ++j) p16[r * ld + j] = to_bf16(row[j]);
  }
}

MESHTRAIN_HOT_LOOP
void score_gradients_block(float* dp, const float* p, int64_t ld, int64_t rows, int64_t nk, int64_t r0,
                           const float* D, float scale, Bf16* ds16) {
  for (int64_t r = 0; r < rows; ++r) {
    float* dr = dp + r * ld;
    const float* pr = p + r * ld;
    const float d = D[r0 + r];
    if (ds16) {
      for (int64_t j = 0; j < nk; ++j) ds16[r * ld + j] = to_bf16(pr[j] * (dr[j] - d) * scale);
      continue;
    }
#pragma omp simd
    for (int64_t j = 0; j < nk; ++j) dr[j] = pr[j] * (dr[j] - d) * scale;
  }
}

void output_dots(float* D, const float* dout, const float* out, const Bf16* dout16, const Bf16* out16, int64_t T,
                 int64_t C, int64_t hs) {
  for (int64_t t = 0; t < T; ++t) {
    float d = 0;
    if (dout16) {
      for (int64_t c = 0; c < hs; ++c) d += to_float(dout16[t * C + c]) * to_float(out16[t * C + c]);
    } else {
#pragma omp simd reduction(+ : d)
      for (int64_t c = 0; c < hs; ++c) d += dout[t * C + c] * out[t * C + c];
    }
    D[t] = d;
  }
}

}  // namespace meshtrain::kernels::flash_detail
