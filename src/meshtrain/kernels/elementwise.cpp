#include "meshtrain/kernels/elementwise.hpp"

#include <omp.h>

#include <cstring>

#include "meshtrain/core/cpu_dispatch.hpp"
#include "meshtrain/kernels/fast_math.hpp"
#include "meshtrain/kernels/parallel.hpp"

namespace meshtrain::kernels {

namespace {
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluCube = 0.044715f;
// Element-wise loops below this size run on one thread: waking the team costs more.
constexpr int64_t kSerialBelow = 1 << 14;

// gelu'(x) (see gelu_forward).
inline float gelu_slope(float x) {
  const float t = fast_tanh(kGeluScale * (x + kGeluCube * x * x * x));
  const float du = kGeluScale * (1.0f + 3.0f * kGeluCube * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}
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
  for (int64_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float t = fast_tanh(kGeluScale * (x + kGeluCube * x * x * x));
    out[i] = 0.5f * x * (1.0f + t);
  }
}

MESHTRAIN_HOT_LOOP
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kSerialBelow)
  for (int64_t i = 0; i < n; ++i) dinp[i] = dout[i] * gelu_slope(inp[i]);
}

MESHTRAIN_HOT_LOOP
void gelu_forward_rounded(Bf16* out16, Bf16* inp16, const float* inp, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kSerialBelow)
  for (int64_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float t = fast_tanh(kGeluScale * (x + kGeluCube * x * x * x));
    inp16[i] = to_bf16(x);
    out16[i] = to_bf16(0.5f * x * (1.0f + t));
  }
}

MESHTRAIN_HOT_LOOP
void gelu_backward_rounded(Bf16* dinp16, float* dbias, const Bf16* inp, const float* dout, int64_t M, int64_t N) {
  // Split by columns (parallel.hpp) so each thread owns its bias sums.
#pragma omp parallel if (M * N >= kSerialBelow)
  {
    const auto [c0, c1] = column_range(N, omp_get_thread_num(), omp_get_num_threads());
    for (int64_t m = 0; m < M; ++m) {
      const Bf16* x = inp + m * N;
      const float* dy = dout + m * N;
      Bf16* dx = dinp16 + m * N;
      if (dbias) {
        for (int64_t j = c0; j < c1; ++j) {
          const float d = dy[j] * gelu_slope(to_float(x[j]));
          dx[j] = to_bf16(d);
          dbias[j] += d;
        }
      } else {
        for (int64_t j = c0; j < c1; ++j) dx[j] = to_bf16(dy[j] * gelu_slope(to_float(x[j])));
      }
    }
  }
}

}  // namespace meshtrain::kernels
