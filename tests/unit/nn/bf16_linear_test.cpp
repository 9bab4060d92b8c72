// A linear layer with bf16 products (training.precision = "bf16") against a
// double-precision reference over the same bf16-rounded operands: forward,
// input gradient, weight and bias gradients, and a deferred weight gradient
// giving the same bits as the immediate one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "grad_check.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/bf16.hpp"
#include "meshtrain/kernels/elementwise.hpp"
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

// A producer that writes the rounded input, or the rounded output gradient
// and the bias gradient, gets the bits of forward() and backward() on the
// fp32 arrays, deferred weight gradient or not.
TEST(LinearBf16, RoundedInputAndOutputGradientGiveTheSameBits) {
  const int64_t M = 21, in = 40, out = 24;
  for (bool defer : {false, true}) {
    Layer plain(in, out), rounded(in, out);
    plain.lin.defer_weight_gradient(defer);
    rounded.lin.defer_weight_gradient(defer);
    Rng rng(13);
    const auto x = random_vector(M * in, rng), res = random_vector(M * out, rng), dy = random_vector(M * out, rng);
    const float* y_plain = plain.lin.forward(x.data(), M, res.data());
    kernels::to_bf16(x.data(), rounded.lin.rounded_input(M), x.size());
    const float* y_rounded = rounded.lin.forward_rounded(M, res.data());
    ASSERT_EQ(std::memcmp(y_plain, y_rounded, M * out * sizeof(float)), 0);
    std::vector<float> dx_plain(M * in), dx_rounded(M * in);
    plain.lin.backward(dx_plain.data(), dy.data());
    kernels::to_bf16(dy.data(), rounded.lin.rounded_output_grad(M), dy.size());
    kernels::bias_backward(rounded.lin.bias_grad(), dy.data(), M, out);
    rounded.lin.backward_rounded(dx_rounded.data());
    if (defer) {
      plain.lin.backward_weight();
      rounded.lin.backward_weight();
    }
    EXPECT_EQ(std::memcmp(dx_plain.data(), dx_rounded.data(), dx_plain.size() * sizeof(float)), 0) << defer;
    const auto g_plain = plain.store.grads(), g_rounded = rounded.store.grads();
    EXPECT_EQ(std::memcmp(g_plain.data(), g_rounded.data(), g_plain.size() * sizeof(float)), 0) << defer;
  }
  ParamStore fp32;
  Linear lin(fp32, "fc", in, out);
  fp32.allocate();
  EXPECT_THROW(lin.rounded_input(M), Error);
  EXPECT_THROW(lin.rounded_output_grad(M), Error);
}

// The input gradient written only rounded is backward()'s rounded, and the
// parameter gradients are backward()'s; an fp32 layer refuses it.
TEST(LinearBf16, RoundedInputGradientIsTheFp32OneRounded) {
  const int64_t M = 19, in = 36, out = 28;
  for (bool defer : {false, true}) {
    Layer plain(in, out), rounded(in, out);
    plain.lin.defer_weight_gradient(defer);
    rounded.lin.defer_weight_gradient(defer);
    Rng rng(17);
    const auto x = random_vector(M * in, rng), dy = random_vector(M * out, rng);
    plain.lin.forward(x.data(), M);
    rounded.lin.forward(x.data(), M);
    std::vector<float> dx(M * in);
    std::vector<Bf16> dx16(M * in);
    plain.lin.backward(dx.data(), dy.data());
    rounded.lin.backward_rounded_input_grad(dx16.data(), dy.data());
    if (defer) {
      plain.lin.backward_weight();
      rounded.lin.backward_weight();
    }
    for (int64_t i = 0; i < M * in; ++i) ASSERT_EQ(dx16[i].bits, to_bf16(dx[i]).bits) << i << " " << defer;
    const auto g_plain = plain.store.grads(), g_rounded = rounded.store.grads();
    EXPECT_EQ(std::memcmp(g_plain.data(), g_rounded.data(), g_plain.size() * sizeof(float)), 0) << defer;
  }
  std::vector<float> dy(M * out, 0.5f), x(M * in, 0.25f);
  std::vector<Bf16> dx16(M * in);
  ParamStore fp32;
  Linear lin(fp32, "fc", in, out);
  fp32.allocate();
  lin.forward(x.data(), M);
  EXPECT_THROW(lin.backward_rounded_input_grad(dx16.data(), dy.data()), Error);
}

}  // namespace
}  // namespace meshtrain::nn
