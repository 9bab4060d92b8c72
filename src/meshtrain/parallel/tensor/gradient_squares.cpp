#include "meshtrain/parallel/tensor/gradient_squares.hpp"

#include <algorithm>

#include "meshtrain/kernels/backend.hpp"

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
      // On the store's device (the CPU's backend is kernels/norm.hpp's sum; elsewhere one wait each).
      sum += kernels::backend_for(store.device())
                 .squared_norm(grads.data(), s.local + (lo - s.begin), s.local + (hi - s.begin));
    }
  }
  return squares;
}

}  // namespace meshtrain::parallel
