#include "meshtrain/parallel/tensor/gradient_squares.hpp"

#include <algorithm>

#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/optim/clip.hpp"

namespace meshtrain::parallel {

GradSquares grad_squares_by_placement(const ParamStore& store, std::span<const float> grads,
                                      const FlatSegments& segments) {
  GradSquares squares;
  for (const ParamView& view : store.views()) {
    const size_t begin = view.offset, end = view.offset + view.numel;
    const bool replicated = view.placement.replicated();
    double& sum = view.expert ? (replicated ? squares.expert_replicated : squares.expert_sharded)
                              : (replicated ? squares.replicated : squares.sharded);
    for (const FlatSegment& s : segments) {
      const size_t lo = std::max(begin, s.begin), hi = std::min(end, s.end);
      if (lo >= hi) continue;
      const size_t from = s.local + (lo - s.begin), to = s.local + (hi - s.begin);
      // Off the CPU the device sums (one wait each: the host-staged path's).
      sum += store.on_host() ? squared_norm_range(grads, from, to)
                             : kernels::backend_for(store.device()).squared_norm(grads.data(), from, to);
    }
  }
  return squares;
}

}  // namespace meshtrain::parallel
