#include "meshtrain/parallel/tensor/gradient_squares.hpp"

#include <algorithm>
#include <vector>

#include "meshtrain/kernels/backend.hpp"

namespace meshtrain::parallel {

GradSquares grad_squares_by_placement(const ParamStore& store, std::span<const float> grads,
                                      const FlatSegments& segments) {
  // Each view's part of each segment, in that order; their sums on the
  // store's device in one wait (the CPU's backend is kernels/norm.hpp's sum).
  std::vector<kernels::Backend::Range> ranges;
  std::vector<double*> into;
  GradSquares squares;
  for (const ParamView& view : store.views()) {
    const size_t begin = view.offset, end = view.offset + view.numel;
    const bool replicated = view.placement.replicated();
    double& sum = view.expert ? (replicated ? squares.expert_replicated : squares.expert_sharded)
                              : (replicated ? squares.replicated : squares.sharded);
    for (const FlatSegment& s : segments) {
      const size_t lo = std::max(begin, s.begin), hi = std::min(end, s.end);
      if (lo >= hi) continue;
      ranges.push_back({s.local + (lo - s.begin), s.local + (hi - s.begin)});
      into.push_back(&sum);
    }
  }
  std::vector<double> sums(ranges.size());
  kernels::backend_for(store.device()).squared_norms(grads.data(), ranges, sums.data());
  for (size_t i = 0; i < sums.size(); ++i) *into[i] += sums[i];  // in the order the loop above added them
  return squares;
}

}  // namespace meshtrain::parallel
