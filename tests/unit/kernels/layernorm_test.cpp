#include "meshtrain/kernels/layernorm.hpp"

#include <omp.h>

#include "kernel_test_util.hpp"

namespace meshtrain::kernels {
namespace {

using namespace testing;

// Naive layernorm in double: (N, C) rows.
std::vector<double> ln_ref(const std::vector<double>& x, const std::vector<double>& w,
                           const std::vector<double>& b, int64_t N, int64_t C) {
  std::vector<double> y(x.size());
  for (int64_t n = 0; n < N; ++n) {
    double m = 0, v = 0;
    for (int64_t c = 0; c < C; ++c) m += x[n * C + c];
    m /= C;
    for (int64_t c = 0; c < C; ++c) v += (x[n * C + c] - m) * (x[n * C + c] - m);
    const double s = 1 / std::sqrt(v / C + kLayerNormEps);
    for (int64_t c = 0; c < C; ++c) y[n * C + c] = (x[n * C + c] - m) * s * w[c] + b[c];
  }
  return y;
}

TEST(LayerNormKernel, ForwardAndBackwardMatchReference) {
  for (auto [N, C] : {std::pair<int64_t, int64_t>{1, 1}, {5, 7}, {9, 40}, {3, 130}}) {
    Rng rng(N * 100 + C);
    auto x = random_vector(N * C, rng, 2.0f);
    for (auto& v : x) v += 3.0f;  // an offset: the variance must not cancel
    auto w = random_vector(C, rng), b = random_vector(C, rng), dy = random_vector(N * C, rng);
    auto dres = random_vector(N * C, rng);

    std::vector<float> y(N * C), mean(N), rstd(N);
    layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    expect_close(y, ln_ref(to_double(x), to_double(w), to_double(b), N, C), 1e-4, 1e-4, "out");

    std::vector<float> dx(N * C), dw(C, 1.0f), db(C, 1.0f);  // dw, db start at 1: must accumulate
    layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(),
                       rstd.data(), dres.data(), N, C);
    const auto xd = to_double(x), wd = to_double(w), bd = to_double(b);
    auto gx = numeric_grad([&](const auto& v) { return dot(ln_ref(v, wd, bd, N, C), dy); }, xd);
    for (int64_t i = 0; i < N * C; ++i) gx[i] += dres[i];
    auto gw = numeric_grad([&](const auto& v) { return dot(ln_ref(xd, v, bd, N, C), dy); }, wd);
    auto gb = numeric_grad([&](const auto& v) { return dot(ln_ref(xd, wd, v, N, C), dy); }, bd);
    for (auto& g : gw) g += 1;
    for (auto& g : gb) g += 1;
    expect_close(dx, gx, 2e-3, 2e-3, "dinp");
    expect_close(dw, gw, 1e-3, 1e-3, "dweight");
    expect_close(db, gb, 1e-3, 1e-3, "dbias");

    // In place: dresid aliases dinp.
    std::vector<float> dx2 = dres;
    std::vector<float> dw2(C), db2(C);
    layernorm_backward(dx2.data(), dw2.data(), db2.data(), dy.data(), x.data(), w.data(), mean.data(),
                       rstd.data(), dx2.data(), N, C);
    expect_close(dx2, dx, 0, 0, "in-place dinp");
  }
}

// Written rounded: the bits of rounding the fp32 output, the same statistics.
TEST(LayerNormKernel, RoundedForwardIsTheFp32OutputRounded) {
  const int64_t N = 40, C = 70;
  Rng rng(5);
  auto x = random_vector(N * C, rng, 2.0f), w = random_vector(C, rng), b = random_vector(C, rng);
  std::vector<float> y(N * C), mean(N), rstd(N), mean16(N), rstd16(N);
  std::vector<Bf16> y16(N * C);
  layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  layernorm_forward_rounded(y16.data(), mean16.data(), rstd16.data(), x.data(), w.data(), b.data(), N, C);
  for (int64_t i = 0; i < N * C; ++i) ASSERT_EQ(y16[i].bits, to_bf16(y[i]).bits) << i;
  expect_close(mean16, mean, 0, 0, "mean");
  expect_close(rstd16, rstd, 0, 0, "rstd");
}

// One thread adds the weight and bias gradients in its row pass, several
// in a column pass: the same sums in the same order, so the same bits.
TEST(LayerNormKernel, BackwardGivesTheSameBitsOnOneAndTwoThreads) {
  const int64_t N = 300, C = 70;  // columns split unevenly
  Rng rng(77);
  auto x = random_vector(N * C, rng, 2.0f), w = random_vector(C, rng), b = random_vector(C, rng);
  auto dy = random_vector(N * C, rng), dres = random_vector(N * C, rng);
  std::vector<float> y(N * C), mean(N), rstd(N);
  layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  auto backward = [&](int threads) {
    std::vector<float> dx(N * C), dw(C, 0.5f), db(C, -0.5f);
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(), rstd.data(),
                       dres.data(), N, C);
    omp_set_num_threads(before);
    return std::vector<std::vector<float>>{dx, dw, db};
  };
  const auto one = backward(1), two = backward(2);
  expect_close(one[0], two[0], 0, 0, "dinp");
  expect_close(one[1], two[1], 0, 0, "dweight");
  expect_close(one[2], two[2], 0, 0, "dbias");
}

}  // namespace
}  // namespace meshtrain::kernels
