#include "meshtrain/kernels/embedding.hpp"

#include <omp.h>

#include <cstring>

#include "meshtrain/core/cpu_dispatch.hpp"
#include "meshtrain/kernels/omp_split.hpp"

namespace meshtrain::kernels {

MESHTRAIN_HOT_LOOP
void encoder_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B,
                     int64_t T, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t bt = 0; bt < B * T; ++bt) {
    const float* e = wte + static_cast<int64_t>(tokens[bt]) * C;
    const float* p = wpe + (bt % T) * C;
    float* o = out + bt * C;
    for (int64_t c = 0; c < C; ++c) o[c] = e[c] + p[c];
  }
}

MESHTRAIN_HOT_LOOP
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B,
                      int64_t T, int64_t C) {
#pragma omp parallel
  {
    const auto [c0, c1] = column_range(C, omp_get_thread_num(), omp_get_num_threads());
    for (int64_t bt = 0; bt < B * T; ++bt) {
      const float* dy = dout + bt * C;
      float* de = dwte + static_cast<int64_t>(tokens[bt]) * C;
      float* dp = dwpe + (bt % T) * C;
      for (int64_t c = c0; c < c1; ++c) {
        de[c] += dy[c];
        dp[c] += dy[c];
      }
    }
  }
}

void embedding_rows_forward(float* out, const int32_t* tokens, const float* wte_rows, int64_t v0, int64_t V_rows,
                            int64_t N, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const int64_t row = static_cast<int64_t>(tokens[n]) - v0;
    float* o = out + n * C;
    if (row < 0 || row >= V_rows) {
      for (int64_t c = 0; c < C; ++c) o[c] = 0;
      continue;
    }
    const float* e = wte_rows + row * C;
    for (int64_t c = 0; c < C; ++c) o[c] = e[c];
  }
}

void embedding_rows_backward(float* dwte_rows, const float* dout, const int32_t* tokens, int64_t v0, int64_t V_rows,
                             int64_t N, int64_t C) {
#pragma omp parallel
  {
    const auto [c0, c1] = column_range(C, omp_get_thread_num(), omp_get_num_threads());
    for (int64_t n = 0; n < N; ++n) {
      const int64_t row = static_cast<int64_t>(tokens[n]) - v0;
      if (row < 0 || row >= V_rows) continue;
      const float* dy = dout + n * C;
      float* de = dwte_rows + row * C;
      for (int64_t c = c0; c < c1; ++c) de[c] += dy[c];
    }
  }
}

void position_add_forward(float* x, const float* pos, int64_t B, int64_t T, int64_t C) {
  position_add_rows_forward(x, pos, 0, B * T, T, C);
}

void position_add_rows_forward(float* x, const float* pos, int64_t row0, int64_t rows, int64_t T, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    const float* p = pos + ((row0 + n) % T) * C;
    float* o = x + n * C;
    for (int64_t c = 0; c < C; ++c) o[c] += p[c];
  }
}

void position_add_backward(float* dpos, const float* dout, int64_t B, int64_t T, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    float* dp = dpos + t * C;
    for (int64_t b = 0; b < B; ++b) {
      const float* dy = dout + (b * T + t) * C;
      for (int64_t c = 0; c < C; ++c) dp[c] += dy[c];
    }
  }
}

void patchify(float* patches, const float* pixels, int64_t B, int64_t ch, int64_t H, int64_t W, int64_t P) {
  const int64_t gh = H / P, gw = W / P, np = gh * gw, pdim = ch * P * P;
#pragma omp parallel for schedule(static)
  for (int64_t bp = 0; bp < B * np; ++bp) {
    const int64_t b = bp / np, gy = (bp % np) / gw, gx = bp % gw;
    float* out = patches + bp * pdim;  // (ch, P, P)
    for (int64_t k = 0; k < ch; ++k) {
      const float* plane = pixels + (b * ch + k) * H * W;
      for (int64_t py = 0; py < P; ++py)
        std::memcpy(out + (k * P + py) * P, plane + (gy * P + py) * W + gx * P, P * sizeof(float));
    }
  }
}

void meanpool_forward(float* out, const float* inp, int64_t B, int64_t T, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < B; ++b) {
    float* o = out + b * C;
    for (int64_t c = 0; c < C; ++c) o[c] = 0;
    for (int64_t t = 0; t < T; ++t) {
      const float* x = inp + (b * T + t) * C;
      for (int64_t c = 0; c < C; ++c) o[c] += x[c];
    }
    const float inv = 1.0f / T;
    for (int64_t c = 0; c < C; ++c) o[c] *= inv;
  }
}

void meanpool_backward(float* dinp, const float* dout, int64_t B, int64_t T, int64_t C) {
  const float inv = 1.0f / T;
#pragma omp parallel for schedule(static)
  for (int64_t bt = 0; bt < B * T; ++bt) {
    const float* dy = dout + (bt / T) * C;
    float* dx = dinp + bt * C;
    for (int64_t c = 0; c < C; ++c) dx[c] = dy[c] * inv;
  }
}

}  // namespace meshtrain::kernels
