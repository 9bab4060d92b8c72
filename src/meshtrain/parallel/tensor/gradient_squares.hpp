#pragma once
// The gradient's sum of squares split by placement, for the global norm
// under tensor parallelism: a replicated tensor (layernorms, biases after a
// row-parallel all-reduce, wpe) holds the same gradient on every tensor rank
// and counts once; a sharded one (column/row weights, the vocabulary-parallel
// wte) holds a different slice on each rank and sums over them. So the global
// squared norm = replicated + sum over the tensor ranks of sharded (after
// both are summed over the data ranks when ZeRO shards the gradients).
#include <span>

#include "meshtrain/core/flat_segment.hpp"
#include "meshtrain/core/param_store.hpp"

namespace meshtrain::parallel {

// Expert tensors (ParamView::expert) are kept apart: under expert
// parallelism each rank of an expert group holds other experts, so their
// squares also sum over the expert group.
struct GradSquares {
  double replicated = 0;
  double sharded = 0;
  double expert_replicated = 0;
  double expert_sharded = 0;
};

// Over the parts of the store's views inside `segments`, whose gradients
// sit in `grads` at each segment's `local` offset (the whole store: one
// segment {0, flat_size, 0} over store.grads()).
GradSquares grad_squares_by_placement(const ParamStore& store, std::span<const float> grads,
                                      const FlatSegments& segments);

}  // namespace meshtrain::parallel
