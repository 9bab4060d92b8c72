#include "meshtrain/kernels/lamb.hpp"

#include "meshtrain/core/cpu_dispatch.hpp"
#include "meshtrain/kernels/norm.hpp"

namespace meshtrain::kernels {
namespace {

// Pass 1 over one chunk. Element i's squares go to lane i % kSquaresLanes;
// whole rounds of lanes first, so the compiler can vectorize them.
MESHTRAIN_HOT_LOOP
void moments_chunk(const float* __restrict w, const float* __restrict g, float* __restrict m, float* __restrict v,
                   size_t n, float wd, const LambStep& s, double* sums) {
  constexpr size_t L = kSquaresLanes;
  double w_lane[L] = {}, u_lane[L] = {};
  auto element = [&](size_t i, size_t lane) {
    lamb_moments_element(m[i], v[i], g[i], s);
    const float u = lamb_direction(m[i], v[i], w[i], wd, s);
    w_lane[lane] += double(w[i]) * double(w[i]);
    u_lane[lane] += double(u) * double(u);
  };
  size_t i = 0;
  for (; i + L <= n; i += L)
    for (size_t j = 0; j < L; ++j) element(i + j, j);
  for (size_t j = 0; i < n; ++i, ++j) element(i, j);
  sums[0] = add_lanes(w_lane);
  sums[1] = add_lanes(u_lane);
}

MESHTRAIN_HOT_LOOP
void apply_chunk(float* __restrict w, const float* __restrict m, const float* __restrict v, size_t n, float wd,
                 float scale, const LambStep& s) {
  for (size_t i = 0; i < n; ++i) w[i] -= scale * lamb_direction(m[i], v[i], w[i], wd, s);
}

}  // namespace

void lamb_moments(std::span<const LambChunk> chunks, const LambStep& step, double* sums) {
  const long n_chunks = long(chunks.size());
#pragma omp parallel for schedule(static)
  for (long c = 0; c < n_chunks; ++c) {
    const LambChunk& ch = chunks[size_t(c)];
    moments_chunk(ch.param, ch.grad, ch.m, ch.v, size_t(ch.size), ch.decays ? step.weight_decay : 0.0f, step,
                  sums + 2 * c);
  }
}

void lamb_apply(std::span<const LambChunk> chunks, const float* scales, const LambStep& step) {
  const long n_chunks = long(chunks.size());
#pragma omp parallel for schedule(static)
  for (long c = 0; c < n_chunks; ++c) {
    const LambChunk& ch = chunks[size_t(c)];
    apply_chunk(ch.param, ch.m, ch.v, size_t(ch.size), ch.decays ? step.weight_decay : 0.0f, scales[ch.view], step);
  }
}

}  // namespace meshtrain::kernels
