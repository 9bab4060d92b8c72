#pragma once
// Finite-difference checks for nn tests. The forward passes run in fp32, so
// eps is large (1e-2) and the tolerance relative (a few %), with an absolute
// floor for gradients too small to measure this way.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "meshtrain/core/param_store.hpp"
#include "meshtrain/core/rng.hpp"

namespace meshtrain::nn::testing {

inline std::vector<float> random_vector(size_t n, Rng& rng, float scale = 1.0f) {
  std::vector<float> v(n);
  for (auto& x : v) x = rng.normal() * scale;
  return v;
}

// sum_i out_i * w_i in double: a scalar loss whose gradient wrt out is w.
inline double dot(const float* out, const std::vector<float>& w) {
  double s = 0;
  for (size_t i = 0; i < w.size(); ++i) s += static_cast<double>(out[i]) * w[i];
  return s;
}

struct Tolerance {
  float eps = 1e-2f;
  double atol = 1e-3;
  double rtol = 2e-2;
};

// For `samples` random indices i (all if n <= samples), compares grad[i] with
// the central difference of loss() in values[i]. values is restored.
inline void expect_grad_matches(float* values, const float* grad, size_t n, const std::function<double()>& loss,
                                const std::string& what, Rng& rng, size_t samples = 24, Tolerance tol = {}) {
  std::vector<size_t> idx;
  if (n <= samples) {
    for (size_t i = 0; i < n; ++i) idx.push_back(i);
  } else {
    for (size_t s = 0; s < samples; ++s) idx.push_back(rng.below(n));
  }
  for (size_t i : idx) {
    const float keep = values[i];
    values[i] = keep + tol.eps;
    const double up = loss();
    values[i] = keep - tol.eps;
    const double down = loss();
    values[i] = keep;
    const double numeric = (up - down) / (2.0 * tol.eps);
    EXPECT_NEAR(grad[i], numeric, tol.atol + tol.rtol * std::fabs(numeric)) << what << "[" << i << "]";
  }
}

// Fills every parameter of store with N(0, scale) so that biases and norm
// parameters are nonzero and every path of a layer carries gradient.
inline void randomize(ParamStore& store, Rng& rng, float scale) {
  for (const auto& v : store.views()) {
    float* p = store.param(&v - store.views().data());
    const bool norm = v.name.find("ln_") != std::string::npos && v.name.ends_with(".weight");
    for (size_t i = 0; i < v.numel; ++i) p[i] = (norm ? 1.0f : 0.0f) + rng.normal() * scale;
  }
}

// Every parameter tensor of store, checked by name.
inline void expect_param_grads_match(ParamStore& store, const std::function<double()>& loss, Rng& rng,
                                     size_t samples_per_tensor = 6, Tolerance tol = {}) {
  for (size_t t = 0; t < store.views().size(); ++t) {
    const auto& v = store.view(t);
    expect_grad_matches(store.param(t), store.grad(t), v.numel, loss, v.name, rng, samples_per_tensor, tol);
  }
}

}  // namespace meshtrain::nn::testing
