#pragma once
// Shared fixtures for optimizer tests: a tiny ParamStore with one decayed
// matrix and one undecayed bias, gradients that change every step, and a
// comparison with a double-precision reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <vector>

#include "meshtrain/core/param_store.hpp"

namespace meshtrain::testing {

// "w" (2, 3) decayed, "b" (3) not decayed; w values O(1), b values O(0.1).
inline void make_tiny_store(ParamStore& s) {
  s.declare("w", {2, 3}, true);
  s.declare("b", {3}, false);
  s.allocate();
  const float w0[] = {0.5f, -1.25f, 2.0f, 0.75f, -0.3f, 1.5f};
  const float b0[] = {0.1f, -0.2f, 0.05f};
  for (size_t i = 0; i < 6; ++i) s.param(0)[i] = w0[i];
  for (size_t i = 0; i < 3; ++i) s.param(1)[i] = b0[i];
}

// Gradient of element i (flat index) at step k (0-based): varied signs and sizes.
inline float grad_value(size_t i, int k) { return float(0.4 * std::sin(0.9 * double(i) + 1.3 * k) + 0.05 * k); }

inline void set_grads(ParamStore& s, int k) {
  for (const auto& v : s.views())
    for (size_t j = 0; j < v.numel; ++j) s.grads()[v.offset + j] = grad_value(v.offset + j, k);
}

// Parameters as doubles (flat layout) to seed a reference.
inline std::vector<double> params_as_double(const ParamStore& s) {
  return {s.params().begin(), s.params().end()};
}

// Relative tolerance 1e-6, with a 1e-7 floor for values near zero.
inline void expect_params_near(const ParamStore& s, const std::vector<double>& ref) {
  for (const auto& v : s.views())
    for (size_t j = 0; j < v.numel; ++j) {
      const size_t i = v.offset + j;
      EXPECT_NEAR(s.params()[i], ref[i], 1e-6 * std::fabs(ref[i]) + 1e-7) << v.name << "[" << j << "]";
    }
}

}  // namespace meshtrain::testing
