// Attention's softmax row passes (see attention_softmax.hpp): the portable
// loops.
#include "meshtrain/kernels/attention_softmax.hpp"

#include "meshtrain/core/cpu_dispatch.hpp"
#include "meshtrain/kernels/fast_math.hpp"

namespace meshtrain::kernels {

MESHTRAIN_HOT_LOOP
void softmax_rows(float* s, int64_t r0, int64_t r1, int64_t T, bool causal, Bf16* p16) {
  for (int64_t t = r0; t < r1; ++t) {
    float* row = s + (t - r0) * T;
    const int64_t n = causal ? t + 1 : T;
    float mx = row[0];
#pragma omp simd reduction(max : mx)
    for (int64_t j = 1; j < n; ++j) mx = row[j] > mx ? row[j] : mx;
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) {
      row[j] = fast_exp(row[j] - mx);
      sum += row[j];
    }
    const float inv = 1.0f / sum;
    if (p16) {
      Bf16* out = p16 + (t - r0) * T;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) out[j] = to_bf16(row[j] * inv);
      for (int64_t j = n; j < T; ++j) out[j] = Bf16{};
      continue;
    }
    for (int64_t j = 0; j < n; ++j) row[j] *= inv;
    for (int64_t j = n; j < T; ++j) row[j] = 0;
  }
}

MESHTRAIN_HOT_LOOP
void softmax_backward_rows(float* dp, const float* p, const Bf16* p16, int64_t r0, int64_t r1, int64_t T,
                           bool causal, float scale, Bf16* ds16) {
  for (int64_t t = r0; t < r1; ++t) {
    float* dr = dp + (t - r0) * T;
    const int64_t n = causal ? t + 1 : T;
    float dot = 0;
    if (ds16) {
      const Bf16* pr = p16 + (t - r0) * T;
      Bf16* out = ds16 + (t - r0) * T;
#pragma omp simd reduction(+ : dot)
      for (int64_t j = 0; j < n; ++j) dot += to_float(pr[j]) * dr[j];
      for (int64_t j = 0; j < n; ++j) out[j] = to_bf16(to_float(pr[j]) * (dr[j] - dot) * scale);
      for (int64_t j = n; j < (causal ? r1 : T); ++j) out[j] = Bf16{};
      continue;
    }
    const float* pr = p + (t - r0) * T;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < n; ++j) dot += pr[j] * dr[j];
    for (int64_t j = 0; j < n; ++j) dr[j] = pr[j] * (dr[j] - dot) * scale;
    for (int64_t j = n; j < T; ++j) dr[j] = 0;
  }
}

}  // namespace meshtrain::kernels
