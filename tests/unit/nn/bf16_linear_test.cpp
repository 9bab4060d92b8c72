// A linear layer with bf16 products (training.precision = "bf16") against a
// double-precision reference over the same bf16-rounded operands: forward,
// input gradient, weight and bias gradients, and a deferred weight gradient
// giving the same bits as the immediate one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "grad_check.hpp"
#include "meshtrain/kernels/bf16.hpp"
#include "meshtrain/nn/linear.hpp"

namespace meshtrain::nn {
namespace {

using namespace testing;

double r16(float x) { return kernels::to_float(kernels::to_bf16(x)); }

struct Layer {
  ParamStore store;
  Linear lin;
  explicit Layer(int64_t in, int64_t out) : lin(store, "fc", in, out) {
    store.set_compute_precision(Precision::Bf16);
    store.allocate();
    Rng rng(3);
    randomize(store, rng, 0.5f);
  }
};

TEST(LinearBf16, ProductsOfRoundedOperandsSummedInFp32) {
  const int64_t M = 37, in = 48, out = 20;
  Layer l(in, out);
  Rng rng(5);
  const auto x = random_vector(M * in, rng), res = random_vector(M * out, rng), dy = random_vector(M * out, rng);
  const float* W = l.store.param(0);
  const float* b = l.store.param(1);
  const float* y = l.lin.forward(x.data(), M, res.data());
  // fp32 summation of `in` exact products: a relative bound of a few ulps of the magnitudes.
  auto tol = [](double magnitude) { return 4e-7 * magnitude + 1e-7; };
  double max_rounding = 0;  // how far bf16 rounding moves the result from fp32's: it must show
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < out; ++j) {
      double s = 0, mag = 0, exact = 0;
      for (int64_t k = 0; k < in; ++k) {
        s += r16(x[i * in + k]) * r16(W[k * out + j]);
        exact += double(x[i * in + k]) * W[k * out + j];
        mag += std::abs(r16(x[i * in + k]) * r16(W[k * out + j]));
      }
      ASSERT_NEAR(y[i * out + j], s + b[j] + res[i * out + j], tol(mag + std::abs(res[i * out + j])));
      max_rounding = std::max(max_rounding, std::abs(exact - s));
    }
  EXPECT_GT(max_rounding, 1e-4);

  std::vector<float> dx(M * in);
  l.store.zero_grads();
  l.lin.backward(dx.data(), dy.data());
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < in; ++k) {
      double s = 0, mag = 0;
      for (int64_t j = 0; j < out; ++j) {
        s += r16(dy[i * out + j]) * r16(W[k * out + j]);
        mag += std::abs(r16(dy[i * out + j]) * r16(W[k * out + j]));
      }
      ASSERT_NEAR(dx[i * in + k], s, tol(mag));
    }
  const float* dW = l.store.grad(0);
  const float* db = l.store.grad(1);
  for (int64_t k = 0; k < in; ++k)
    for (int64_t j = 0; j < out; ++j) {
      double s = 0, mag = 0;
      for (int64_t i = 0; i < M; ++i) {
        s += r16(x[i * in + k]) * r16(dy[i * out + j]);
        mag += std::abs(r16(x[i * in + k]) * r16(dy[i * out + j]));
      }
      ASSERT_NEAR(dW[k * out + j], s, tol(mag));
    }
  for (int64_t j = 0; j < out; ++j) {  // the bias gradient sums fp32 dout, unrounded
    double s = 0;
    for (int64_t i = 0; i < M; ++i) s += dy[i * out + j];
    ASSERT_NEAR(db[j], s, 1e-5);
  }
}

TEST(LinearBf16, DeferredWeightGradientIsTheSameBits) {
  const int64_t M = 16, in = 24, out = 32;
  Layer now(in, out), later(in, out);
  Rng rng(9);
  const auto x = random_vector(M * in, rng), dy = random_vector(M * out, rng);
  std::vector<float> dx_now(M * in), dx_later(M * in);
  now.lin.forward(x.data(), M);
  now.lin.backward(dx_now.data(), dy.data());
  later.lin.defer_weight_gradient(true);
  later.lin.forward(x.data(), M);
  later.lin.backward(dx_later.data(), dy.data());
  later.lin.backward_weight();
  EXPECT_EQ(std::memcmp(dx_now.data(), dx_later.data(), dx_now.size() * sizeof(float)), 0);
  const auto g_now = now.store.grads(), g_later = later.store.grads();
  EXPECT_EQ(std::memcmp(g_now.data(), g_later.data(), g_now.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace meshtrain::nn
