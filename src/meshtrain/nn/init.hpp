#pragma once
// Parameter initialization helpers.
//
// Each tensor draws from its own stream, derived from the model's generator
// (its state, which is never advanced: it stands for the seed) and the
// tensor's global name, in global element order. A tensor's values therefore
// do not depend on which other tensors the model has, nor on the order in
// which they are initialized: a model with more layers, a pipeline stage
// holding some of them, or a rank holding a slice of a tensor makes exactly
// the values of the one-process model with the same seed.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "meshtrain/core/param_store.hpp"
#include "meshtrain/core/rng.hpp"

namespace meshtrain::nn {

// The stream of the tensor called `name` (FNV-1a of the name selects it).
inline Rng tensor_stream(const Rng& model, std::string_view name) {
  uint64_t hash = 14695981039346656037ull;
  for (char c : name) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 1099511628211ull;
  }
  return Rng::derive(model.state()[0], hash);
}

// View `view` of `store` from N(0, stddev^2), in its own stream. A sharded
// view draws the whole tensor's values and keeps its own: any shard equals
// the slice of the one-process model's tensor.
inline void fill_normal(ParamStore& store, size_t view, const Rng& model, float stddev) {
  const ParamView& v = store.view(view);
  Rng rng = tensor_stream(model, v.name);
  float* p = store.param(view);
  if (v.placement.replicated()) {
    for (size_t i = 0; i < v.numel; ++i) p[i] = rng.normal() * stddev;
    return;
  }
  std::vector<float> whole(static_cast<size_t>(numel(v.global_shape)));
  for (float& x : whole) x = rng.normal() * stddev;
  for (size_t i = 0; i < v.numel; ++i) p[i] = whole[global_index(v.global_shape, v.placement, i)];
}

inline void fill_constant(float* p, size_t n, float value) {
  for (size_t i = 0; i < n; ++i) p[i] = value;
}

}  // namespace meshtrain::nn
