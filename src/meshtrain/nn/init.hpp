#pragma once
// Parameter initialization helpers. Values are drawn in element order from one
// Rng, so a model initialized with the same seed is bitwise identical.
#include <cstddef>

#include "meshtrain/core/rng.hpp"

namespace meshtrain::nn {

inline void fill_normal(float* p, size_t n, Rng& rng, float stddev) {
  for (size_t i = 0; i < n; ++i) p[i] = rng.normal() * stddev;
}

inline void fill_constant(float* p, size_t n, float value) {
  for (size_t i = 0; i < n; ++i) p[i] = value;
}

}  // namespace meshtrain::nn
