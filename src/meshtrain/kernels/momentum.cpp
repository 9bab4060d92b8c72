#include "meshtrain/kernels/momentum.hpp"

#include "meshtrain/core/cpu_dispatch.hpp"
#include "meshtrain/kernels/norm.hpp"

namespace meshtrain::kernels {
namespace {

// One chunk; the buffer's presence is decided once, outside the loop, so
// each loop vectorizes. A free function: a virtual one cannot carry clones.
MESHTRAIN_HOT_LOOP
void momentum_chunk(float* __restrict w, const float* __restrict g, float* __restrict buf, size_t n, float wd,
                    float trust, const MomentumStep& s) {
  if (buf)
    for (size_t i = 0; i < n; ++i) momentum_element(w[i], g[i], &buf[i], wd, trust, s);
  else
    for (size_t i = 0; i < n; ++i) momentum_element(w[i], g[i], nullptr, wd, trust, s);
}

}  // namespace

void momentum_squares(std::span<const MomentumChunk> chunks, double* sums) {
  const long n_chunks = long(chunks.size());
#pragma omp parallel for schedule(static)
  for (long c = 0; c < n_chunks; ++c) {
    const MomentumChunk& ch = chunks[size_t(c)];
    const bool adapts = ch.decays != 0;
    sums[2 * c] = adapts ? sum_squares(ch.param, size_t(ch.size)) : 0.0;
    sums[2 * c + 1] = adapts ? sum_squares(ch.grad, size_t(ch.size)) : 0.0;
  }
}

void momentum_update(std::span<const MomentumChunk> chunks, const float* trusts, const MomentumStep& step) {
  const long n_chunks = long(chunks.size());
#pragma omp parallel for schedule(static)
  for (long c = 0; c < n_chunks; ++c) {
    const MomentumChunk& ch = chunks[size_t(c)];
    momentum_chunk(ch.param, ch.grad, ch.momentum, size_t(ch.size), ch.decays ? step.weight_decay : 0.0f,
                   trusts ? trusts[ch.view] : 1.0f, step);
  }
}

}  // namespace meshtrain::kernels
