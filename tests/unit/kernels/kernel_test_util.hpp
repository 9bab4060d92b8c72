#pragma once
// Helpers for kernel tests: random inputs, and gradients of naive double
// references by central differences (in double, so eps = 1e-4 is exact enough
// to judge fp32 kernels at ~1e-4 relative).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "meshtrain/core/rng.hpp"

namespace meshtrain::kernels::testing {

inline std::vector<float> random_vector(size_t n, Rng& rng, float scale = 1.0f) {
  std::vector<float> v(n);
  for (auto& x : v) x = rng.normal() * scale;
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// d f / d x at x, by central differences.
inline std::vector<double> numeric_grad(const std::function<double(const std::vector<double>&)>& f,
                                        std::vector<double> x, double eps = 1e-4) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + eps;
    const double up = f(x);
    x[i] = keep - eps;
    const double down = f(x);
    x[i] = keep;
    g[i] = (up - down) / (2 * eps);
  }
  return g;
}

// Every element within atol + rtol * |expected|.
template <class A, class B>
void expect_close(const A& actual, const B& expected, double atol, double rtol, const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    ASSERT_NEAR(a, e, atol + rtol * std::fabs(e)) << what << " at index " << i;
  }
}

// sum_i w_i * y_i: a scalar loss whose gradient wrt y is w.
inline double dot(const std::vector<double>& y, const std::vector<float>& w) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += y[i] * w[i];
  return s;
}

}  // namespace meshtrain::kernels::testing
