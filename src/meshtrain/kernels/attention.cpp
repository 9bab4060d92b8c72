#include "meshtrain/kernels/attention.hpp"

#include <algorithm>
#include <cmath>

#include "meshtrain/core/cpu_dispatch.hpp"
#include "meshtrain/kernels/fast_math.hpp"
#include "meshtrain/kernels/gemm.hpp"

namespace meshtrain::kernels {

namespace {

// Row-wise softmax of rows [r0, r1) of the scores (T, T), s pointing at row
// r0, in place; with causal, row t keeps columns [0, t] and the rest become
// exact zeros (they were never computed).
MESHTRAIN_HOT_LOOP
void softmax_rows(float* s, int64_t r0, int64_t r1, int64_t T, bool causal) {
  for (int64_t t = r0; t < r1; ++t) {
    float* row = s + (t - r0) * T;
    const int64_t n = causal ? t + 1 : T;
    float mx = row[0];
    for (int64_t j = 1; j < n; ++j) mx = row[j] > mx ? row[j] : mx;
    float sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      row[j] = fast_exp(row[j] - mx);
      sum += row[j];
    }
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < n; ++j) row[j] *= inv;
    for (int64_t j = n; j < T; ++j) row[j] = 0;
  }
}

}  // namespace

// Causal attention is computed in blocks of kRowBlock query rows: rows
// [r0, r1) only meet keys [0, r1), so the gemms skip most of the masked upper
// triangle (at T = 256, 10/16 of the full work). Non-causal uses one block.
constexpr int64_t kRowBlock = 64;

MESHTRAIN_HOT_LOOP
void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t C,
                       int64_t NH, bool causal) {
  const int64_t hs = C / NH, R = causal ? kRowBlock : T;
  const int ti = static_cast<int>(T), hi = static_cast<int>(hs);
  const int ld3 = static_cast<int>(3 * C), ldc = static_cast<int>(C);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < B * NH; ++bh) {
    const int64_t b = bh / NH, h = bh % NH;
    const float* q = qkv + b * T * 3 * C + h * hs;  // (T, hs), row stride 3C
    const float* k = q + C;
    const float* v = q + 2 * C;
    float* a = att + bh * T * T;  // (T, T)
    float* y = out + b * T * C + h * hs;  // (T, hs), row stride C
    for (int64_t r0 = 0; r0 < T; r0 += R) {
      const int64_t r1 = std::min(T, r0 + R);
      const int rows = static_cast<int>(r1 - r0), keys = static_cast<int>(causal ? r1 : T);
      // scores a[r0:r1, 0:keys] = scale * q[r0:r1] k[0:keys]^T; softmax zeroes the rest of each row.
      gemm(Trans::No, Trans::Yes, rows, keys, hi, scale, q + r0 * 3 * C, ld3, k, ld3, 0.0f, a + r0 * T, ti);
      softmax_rows(a + r0 * T, r0, r1, T, causal);
      gemm(Trans::No, Trans::No, rows, hi, keys, 1.0f, a + r0 * T, ti, v, ld3, 0.0f, y + r0 * C, ldc);
    }
  }
}

MESHTRAIN_HOT_LOOP
void attention_backward(float* dqkv, float* datt, const float* dout, const float* att, const float* qkv,
                        int64_t B, int64_t T, int64_t C, int64_t NH, bool causal) {
  // With p = att and dp = datt:  ds = p * (dp - sum_j p dp) per row, with the
  // 1/sqrt(hs) score scale folded in. Query-side products (dp, dq) go by row
  // blocks [r0, r1) against keys [0, r1); key-side products (dv, dk) by key
  // blocks [j0, j1) against the queries [j0, T) that can see them.
  const int64_t hs = C / NH, R = causal ? kRowBlock : T;
  const int ti = static_cast<int>(T), hi = static_cast<int>(hs);
  const int ld3 = static_cast<int>(3 * C), ldc = static_cast<int>(C);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < B * NH; ++bh) {
    const int64_t b = bh / NH, h = bh % NH;
    const float* q = qkv + b * T * 3 * C + h * hs;
    const float* k = q + C;
    const float* v = q + 2 * C;
    float* dq = dqkv + b * T * 3 * C + h * hs;
    float* dk = dq + C;
    float* dv = dq + 2 * C;
    const float* dy = dout + b * T * C + h * hs;  // (T, hs), row stride C
    const float* p = att + bh * T * T;             // (T, T)
    float* dp = datt + bh * T * T;                 // (T, T)
    for (int64_t r0 = 0; r0 < T; r0 += R) {
      const int64_t r1 = std::min(T, r0 + R);
      const int rows = static_cast<int>(r1 - r0), keys = static_cast<int>(causal ? r1 : T);
      // dp[r0:r1, 0:keys] = dy[r0:r1] v[0:keys]^T, then ds in place.
      gemm(Trans::No, Trans::Yes, rows, keys, hi, 1.0f, dy + r0 * C, ldc, v, ld3, 0.0f, dp + r0 * T, ti);
      for (int64_t t = r0; t < r1; ++t) {
        const float* pr = p + t * T;
        float* dr = dp + t * T;
        const int64_t n = causal ? t + 1 : T;
        float dot = 0;
        for (int64_t j = 0; j < n; ++j) dot += pr[j] * dr[j];
        for (int64_t j = 0; j < n; ++j) dr[j] = pr[j] * (dr[j] - dot) * scale;
        for (int64_t j = n; j < T; ++j) dr[j] = 0;
      }
      // dq[r0:r1] = ds[r0:r1, 0:keys] k[0:keys]
      gemm(Trans::No, Trans::No, rows, hi, keys, 1.0f, dp + r0 * T, ti, k, ld3, 0.0f, dq + r0 * 3 * C, ld3);
    }
    for (int64_t j0 = 0; j0 < T; j0 += R) {
      const int64_t j1 = std::min(T, j0 + R), q0 = causal ? j0 : 0;
      const int keys = static_cast<int>(j1 - j0), queries = static_cast<int>(T - q0);
      // dv[j0:j1] = p[q0:T, j0:j1]^T dy[q0:T];  dk[j0:j1] = ds[q0:T, j0:j1]^T q[q0:T]
      gemm(Trans::Yes, Trans::No, keys, hi, queries, 1.0f, p + q0 * T + j0, ti, dy + q0 * C, ldc, 0.0f,
           dv + j0 * 3 * C, ld3);
      gemm(Trans::Yes, Trans::No, keys, hi, queries, 1.0f, dp + q0 * T + j0, ti, q + q0 * 3 * C, ld3, 0.0f,
           dk + j0 * 3 * C, ld3);
    }
  }
}

}  // namespace meshtrain::kernels
