#include "meshtrain/kernels/elementwise.hpp"

#include "kernel_test_util.hpp"
#include "meshtrain/kernels/fast_math.hpp"

namespace meshtrain::kernels {
namespace {

using namespace testing;

double gelu_ref(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

TEST(FastMath, ExpAndTanhAreAccurate) {
  for (float x = -80; x < 80; x += 0.01f) {
    const double e = std::exp(static_cast<double>(x));
    ASSERT_NEAR(fast_exp(x), e, 3e-7 * e) << x;
    ASSERT_NEAR(fast_tanh(x), std::tanh(static_cast<double>(x)), 5e-7) << x;
  }
  EXPECT_EQ(fast_tanh(1e6f), 1.0f);
  EXPECT_EQ(fast_tanh(-1e6f), -1.0f);
  EXPECT_LT(fast_exp(-1e6f), 1e-37f);
}

TEST(GeluKernel, ForwardAndBackwardMatchReference) {
  for (int64_t n : {1, 17, 40000}) {  // 40000 crosses the parallel threshold
    Rng rng(n);
    auto x = random_vector(n, rng, 3.0f), dy = random_vector(n, rng);
    std::vector<float> y(n), dx(n);
    gelu_forward(y.data(), x.data(), n);
    gelu_backward(dx.data(), x.data(), dy.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double xi = x[i], eps = 1e-5;
      ASSERT_NEAR(y[i], gelu_ref(xi), 1e-6 + 1e-6 * std::fabs(xi)) << i;
      const double g = (gelu_ref(xi + eps) - gelu_ref(xi - eps)) / (2 * eps) * dy[i];
      ASSERT_NEAR(dx[i], g, 1e-5 + 1e-5 * std::fabs(g)) << i;
    }
    gelu_backward(dy.data(), x.data(), dy.data(), n);  // in place
    expect_close(dy, dx, 0, 0, "in-place gelu backward");
  }
}

// The rounded GELU passes (table lookups) give the bits of the fp32 passes on
// the bf16 pre-activation and output gradient widened (exact), rounded after,
// and the fused bias gradients those of bias_backward on the fp32 gradient.
TEST(GeluKernel, RoundedPassesAreTheFp32PassesRounded) {
  for (auto [M, N] : {std::pair<int64_t, int64_t>{1, 1}, {3, 17}, {130, 200}, {40, 2500}}) {
    // 26000 crosses the threshold; 2500 columns span several lookup chunks
    const int64_t n = M * N;
    Rng rng(n + 9);
    auto x = random_vector(n, rng, 3.0f), dy = random_vector(n, rng), bias0 = random_vector(N, rng);
    std::vector<Bf16> out16(n), x16(n), dy16(n), dx16(n);
    std::vector<float> x_widened(n), dy_widened(n), y(n), dx(n);
    for (int64_t i = 0; i < n; ++i) {
      x16[i] = to_bf16(x[i]);
      x_widened[i] = to_float(x16[i]);
      dy16[i] = to_bf16(dy[i]);
      dy_widened[i] = to_float(dy16[i]);
    }
    gelu_forward_bf16(out16.data(), x16.data(), n);
    gelu_forward(y.data(), x_widened.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out16[i].bits, to_bf16(y[i]).bits) << i;
    std::vector<float> want_bias = bias0, got_bias = bias0;
    gelu_backward(dx.data(), x_widened.data(), dy_widened.data(), n);
    bias_backward(want_bias.data(), dx.data(), M, N);
    gelu_backward_rounded(dx16.data(), got_bias.data(), x16.data(), dy16.data(), M, N);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(dx16[i].bits, to_bf16(dx[i]).bits) << i;
    expect_close(got_bias, want_bias, 0, 0, "fused bias gradient");
    std::vector<Bf16> no_bias(n);
    gelu_backward_rounded(no_bias.data(), nullptr, x16.data(), dy16.data(), M, N);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(no_bias[i].bits, dx16[i].bits) << i;
    std::vector<float> sums = bias0, fused = bias0;
    std::vector<Bf16> rounded(n);
    bias_backward(sums.data(), dy.data(), M, N);
    bias_backward_rounded(fused.data(), rounded.data(), dy.data(), M, N);
    expect_close(fused, sums, 0, 0, "bias gradient with the rounding");
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(rounded[i].bits, dy16[i].bits) << i;
  }
}

// Every bf16 value, infinities, denormals and NaNs included: the lookups
// agree with the fp32 passes (NaN in, NaN out).
TEST(GeluKernel, RoundedPassesCoverEveryBf16Value) {
  const int64_t n = 1 << 16;
  std::vector<float> x(n), y(n), dx(n), dy(n, 0.75f), bias(1 << 16, 0.0f);
  const std::vector<Bf16> dy16(n, to_bf16(0.75f));
  for (int64_t i = 0; i < n; ++i) x[i] = to_float(Bf16{static_cast<uint16_t>(i)});
  std::vector<Bf16> out16(n), x16(n), dx16(n);
  for (int64_t i = 0; i < n; ++i) x16[i].bits = static_cast<uint16_t>(i);
  gelu_forward_bf16(out16.data(), x16.data(), n);
  gelu_forward(y.data(), x.data(), n);
  gelu_backward(dx.data(), x.data(), dy.data(), n);
  gelu_backward_rounded(dx16.data(), bias.data(), x16.data(), dy16.data(), 1, n);
  int64_t nans = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(y[i])) {
      ++nans;
      ASSERT_TRUE(std::isnan(to_float(out16[i]))) << i;
      ASSERT_TRUE(std::isnan(to_float(dx16[i]))) << i;
      continue;
    }
    ASSERT_EQ(out16[i].bits, to_bf16(y[i]).bits) << i;
    if (std::isinf(x[i])) {  // inf * 0 in the slope, in both passes
      ASSERT_TRUE(std::isnan(dx[i]) && std::isnan(to_float(dx16[i])) && std::isnan(bias[i])) << i;
      continue;
    }
    // Finite x: a finite slope, 1 or 0 far out (no 0 * inf from x^3's overflow).
    ASSERT_TRUE(std::isfinite(dx[i])) << i << " " << x[i];
    if (std::fabs(x[i]) > 10) {
      ASSERT_EQ(dx[i], x[i] > 0 ? 0.75f : 0.0f) << x[i];
    }
    ASSERT_EQ(dx16[i].bits, to_bf16(dx[i]).bits) << i;
    ASSERT_EQ(bias[i], dx[i]) << i;
  }
  EXPECT_EQ(nans, 2 * 127 + 1);  // the NaNs (either sign), and gelu(-inf) = -inf * 0
}

TEST(RowKernels, FillRowsAndBiasBackward) {
  for (auto [M, N] : {std::pair<int64_t, int64_t>{1, 1}, {3, 5}, {300, 70}, {2, 33}}) {
    Rng rng(M * N);
    auto bias = random_vector(N, rng), res = random_vector(M * N, rng);
    std::vector<float> out(M * N);
    fill_rows(out.data(), bias.data(), res.data(), M, N);
    for (int64_t i = 0; i < M * N; ++i) ASSERT_FLOAT_EQ(out[i], res[i] + bias[i % N]);
    fill_rows(out.data(), bias.data(), nullptr, M, N);
    for (int64_t i = 0; i < M * N; ++i) ASSERT_FLOAT_EQ(out[i], bias[i % N]);
    fill_rows(out.data(), nullptr, res.data(), M, N);
    for (int64_t i = 0; i < M * N; ++i) ASSERT_FLOAT_EQ(out[i], res[i]);
    fill_rows(out.data(), nullptr, nullptr, M, N);
    for (int64_t i = 0; i < M * N; ++i) ASSERT_EQ(out[i], 0.0f);

    std::vector<float> db(N, 0.5f);
    std::vector<double> want(N, 0.5);
    for (int64_t i = 0; i < M * N; ++i) want[i % N] += res[i];
    bias_backward(db.data(), res.data(), M, N);
    expect_close(db, want, 1e-4, 1e-5, "dbias");
  }
}

TEST(RowKernels, ResidualAdd) {
  Rng rng(3);
  auto a = random_vector(50000, rng), b = random_vector(50000, rng);
  std::vector<float> out(a.size());
  residual_forward(out.data(), a.data(), b.data(), 50000);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(out[i], a[i] + b[i]);
}

}  // namespace
}  // namespace meshtrain::kernels
