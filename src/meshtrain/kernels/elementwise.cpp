#include "meshtrain/kernels/elementwise.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "meshtrain/core/cpu_dispatch.hpp"
#include "meshtrain/kernels/gelu_math.hpp"
#include "meshtrain/kernels/gelu_table.hpp"
#include "meshtrain/kernels/omp_split.hpp"

namespace meshtrain::kernels {

namespace {
using detail::gelu_slope;
using detail::gelu_value;
// Element-wise loops below this size run on one thread: waking the team costs more.
constexpr int64_t kSerialBelow = 1 << 14;
// The bf16 GELU's backward looks a row's slopes up element by element, then
// applies them with vector code, a chunk of columns at a time.
constexpr int64_t kTableChunk = 1024;
}  // namespace

MESHTRAIN_HOT_LOOP
void add_rows(float* out, const float* bias, const float* residual, int64_t M, int64_t N) {
  if (!bias && !residual) return;
#pragma omp parallel for schedule(static) if (M * N >= kSerialBelow)
  for (int64_t m = 0; m < M; ++m) {
    float* o = out + m * N;
    const float* r = residual ? residual + m * N : nullptr;
    for (int64_t j = 0; j < N; ++j) o[j] += (bias ? bias[j] : 0.0f) + (r ? r[j] : 0.0f);
  }
}

MESHTRAIN_HOT_LOOP
void fill_rows(float* out, const float* bias, const float* residual, int64_t M, int64_t N) {
#pragma omp parallel for schedule(static) if (M * N >= kSerialBelow)
  for (int64_t m = 0; m < M; ++m) {
    float* o = out + m * N;
    const float* r = residual ? residual + m * N : nullptr;
    if (bias && r) {
      for (int64_t j = 0; j < N; ++j) o[j] = r[j] + bias[j];
    } else if (bias) {
      std::memcpy(o, bias, N * sizeof(float));
    } else if (r) {
      std::memcpy(o, r, N * sizeof(float));
    } else {
      std::memset(o, 0, N * sizeof(float));
    }
  }
}

MESHTRAIN_HOT_LOOP
void bias_backward(float* dbias, const float* dout, int64_t M, int64_t N) {
#pragma omp parallel if (M * N >= kSerialBelow)
  {
    const auto [c0, c1] = column_range(N, omp_get_thread_num(), omp_get_num_threads());
    for (int64_t m = 0; m < M; ++m) {
      const float* dy = dout + m * N;
      for (int64_t j = c0; j < c1; ++j) dbias[j] += dy[j];
    }
  }
}

MESHTRAIN_HOT_LOOP
void bias_backward_rounded(float* dbias, Bf16* dout16, const float* dout, int64_t M, int64_t N) {
#pragma omp parallel if (M * N >= kSerialBelow)
  {
    const auto [c0, c1] = column_range(N, omp_get_thread_num(), omp_get_num_threads());
    for (int64_t m = 0; m < M; ++m) {
      const float* dy = dout + m * N;
      Bf16* d16 = dout16 + m * N;
      for (int64_t j = c0; j < c1; ++j) {
        dbias[j] += dy[j];
        d16[j] = to_bf16(dy[j]);
      }
    }
  }
}

MESHTRAIN_HOT_LOOP
void residual_forward(float* out, const float* a, const float* b, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kSerialBelow)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

MESHTRAIN_HOT_LOOP
void gelu_forward(float* out, const float* inp, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kSerialBelow)
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_value(inp[i]);
}

MESHTRAIN_HOT_LOOP
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kSerialBelow)
  for (int64_t i = 0; i < n; ++i) dinp[i] = dout[i] * gelu_slope(inp[i]);
}

void gelu_forward_bf16(Bf16* out16, const Bf16* inp16, int64_t n) {
  const uint16_t* value = detail::gelu_table().value;
  // Scalar loads (GCC does not vectorize these with gathers, which measured
  // slower on Zen 4/5).
#pragma omp parallel for schedule(static) if (n >= kSerialBelow)
  for (int64_t i = 0; i < n; ++i) out16[i].bits = value[inp16[i].bits];
}

// Split by columns (omp_split.hpp) so each thread owns its bias sums.
MESHTRAIN_HOT_LOOP
void gelu_backward_rounded(Bf16* dinp16, float* dbias, const Bf16* inp, const Bf16* dout, int64_t M, int64_t N) {
  const float* slope_of = detail::gelu_table().slope;
#pragma omp parallel if (M * N >= kSerialBelow)
  {
    const auto [c0, c1] = column_range(N, omp_get_thread_num(), omp_get_num_threads());
    alignas(64) float slope[kTableChunk];  // gelu'(x) of one row's columns [j0, j0 + n)
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t j0 = c0; j0 < c1; j0 += kTableChunk) {
        const int64_t n = std::min(c1 - j0, kTableChunk);
        const Bf16* x = inp + m * N + j0;
        const Bf16* dy = dout + m * N + j0;
        Bf16* dx = dinp16 + m * N + j0;
        // Scalar loads, as in gelu_forward_bf16.
        for (int64_t j = 0; j < n; ++j) slope[j] = slope_of[x[j].bits];
        if (dbias) {
          float* db = dbias + j0;
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) {
            const float d = to_float(dy[j]) * slope[j];
            dx[j] = to_bf16(d);
            db[j] += d;
          }
        } else {
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) dx[j] = to_bf16(to_float(dy[j]) * slope[j]);
        }
      }
    }
  }
}

}  // namespace meshtrain::kernels
