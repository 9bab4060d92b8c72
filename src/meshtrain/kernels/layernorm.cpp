#include "meshtrain/kernels/layernorm.hpp"

#include <omp.h>

#include <cmath>

#include "meshtrain/core/cpu_dispatch.hpp"
#include "meshtrain/kernels/layernorm_math.hpp"
#include "meshtrain/kernels/omp_split.hpp"

namespace meshtrain::kernels {

namespace {

[[gnu::always_inline]] inline void store(float* o, float v) { *o = v; }
[[gnu::always_inline]] inline void store(Bf16* o, float v) { *o = to_bf16(v); }

// One row; inlined into each instruction-set clone below (an OpenMP region
// in a helper would be outlined once, for the baseline ISA).
template <class Out>
[[gnu::always_inline]] inline void forward_row(Out* o, float& mean, float& rstd, const float* x, const float* weight,
                                               const float* bias, int64_t C) {
  // Two passes over a row that sits in L1: the shifted variance does not
  // cancel catastrophically the way E[x^2] - E[x]^2 does.
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < C; ++c) sum += x[c];
  const float m = sum / C;
  float var = 0;
#pragma omp simd reduction(+ : var)
  for (int64_t c = 0; c < C; ++c) var += (x[c] - m) * (x[c] - m);
  const float s = 1.0f / std::sqrt(var / C + kLayerNormEps);
  for (int64_t c = 0; c < C; ++c) store(o + c, layernorm_out(x[c], m, s, weight[c], bias[c]));
  mean = m;
  rstd = s;
}

}  // namespace

MESHTRAIN_HOT_LOOP
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) forward_row(out + n * C, mean[n], rstd[n], inp + n * C, weight, bias, C);
}

MESHTRAIN_HOT_LOOP
void layernorm_forward_rounded(Bf16* out16, float* mean, float* rstd, const float* inp, const float* weight,
                               const float* bias, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) forward_row(out16 + n * C, mean[n], rstd[n], inp + n * C, weight, bias, C);
}

MESHTRAIN_HOT_LOOP
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, const float* dresid,
                        int64_t N, int64_t C) {
  // Terms: xhat = (x - mean) * rstd, dnorm = dout * weight. Then
  //   dinp = rstd * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)).
  // Pass 1 (rows): dinp. Pass 2 (columns): dweight += sum_n dout * xhat,
  // dbias += sum_n dout; splitting columns keeps the sums race-free. On one
  // thread pass 1 adds them itself, while its rows are in cache: the same
  // sums in the same order (row by row per column), one read of dout and
  // inp fewer.
  const bool one_thread = omp_in_parallel() || omp_get_max_threads() == 1;
#pragma omp parallel if (!one_thread)
  {
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const float* x = inp + n * C;
      const float* dy = dout + n * C;
      float* dx = dinp + n * C;
      const float m = mean[n], s = rstd[n];
      float sum_dnorm = 0, sum_dnorm_xhat = 0;
#pragma omp simd reduction(+ : sum_dnorm, sum_dnorm_xhat)
      for (int64_t c = 0; c < C; ++c) {
        const float dnorm = dy[c] * weight[c];
        sum_dnorm += dnorm;
        sum_dnorm_xhat += dnorm * (x[c] - m) * s;
      }
      const float mean_dnorm = sum_dnorm / C, mean_dnorm_xhat = sum_dnorm_xhat / C;
      if (dresid) {
        const float* dr = dresid + n * C;  // may alias dx: read before write, same index
        for (int64_t c = 0; c < C; ++c)
          dx[c] = dr[c] + layernorm_dinp(dy[c], x[c], m, s, weight[c], mean_dnorm, mean_dnorm_xhat);
      } else {
        for (int64_t c = 0; c < C; ++c)
          dx[c] = layernorm_dinp(dy[c], x[c], m, s, weight[c], mean_dnorm, mean_dnorm_xhat);
      }
      if (one_thread) {
        for (int64_t c = 0; c < C; ++c) {
          dweight[c] += dy[c] * (x[c] - m) * s;
          dbias[c] += dy[c];
        }
      }
    }
    if (!one_thread) {
      const auto [c0, c1] = column_range(C, omp_get_thread_num(), omp_get_num_threads());
      for (int64_t n = 0; n < N; ++n) {
        const float* x = inp + n * C;
        const float* dy = dout + n * C;
        const float m = mean[n], s = rstd[n];
        for (int64_t c = c0; c < c1; ++c) {
          dweight[c] += dy[c] * (x[c] - m) * s;
          dbias[c] += dy[c];
        }
      }
    }
  }
}

}  // namespace meshtrain::kernels
