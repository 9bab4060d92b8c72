#include "meshtrain/kernels/adamw.hpp"

#include "meshtrain/core/cpu_dispatch.hpp"

namespace meshtrain::kernels {
namespace {

// One chunk. Four distinct buffers: __restrict lets the compiler vectorize
// the loop (sqrt and division included; IEEE-exact, so results are
// unchanged). A free function: a virtual one cannot carry clones.
MESHTRAIN_HOT_LOOP
void adamw_chunk(float* __restrict w, const float* __restrict g, float* __restrict m, float* __restrict v, size_t n,
                 float decay, const AdamWStep& s) {
  for (size_t i = 0; i < n; ++i) adamw_element(w[i], g[i], m[i], v[i], decay, s);
}

}  // namespace

void adamw_update(std::span<const AdamWChunk> chunks, const AdamWStep& step) {
  const long n_chunks = long(chunks.size());
#pragma omp parallel for schedule(static)
  for (long c = 0; c < n_chunks; ++c) {
    const AdamWChunk& ch = chunks[size_t(c)];
    adamw_chunk(ch.param, ch.grad, ch.m, ch.v, ch.size, ch.weight_decay ? step.decay_factor : 1.0f, step);
  }
}

}  // namespace meshtrain::kernels
