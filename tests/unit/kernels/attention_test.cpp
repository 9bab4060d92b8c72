#include "meshtrain/kernels/attention.hpp"

#include "kernel_test_util.hpp"

namespace meshtrain::kernels {
namespace {

using namespace testing;

// Naive attention in double: qkv (B, T, 3C) -> out (B, T, C).
std::vector<double> attention_ref(const std::vector<double>& qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                                  bool causal) {
  const int64_t hs = C / NH;
  std::vector<double> out(B * T * C, 0.0), p(T);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const double* q = &qkv[(b * T + t) * 3 * C + h * hs];
        const int64_t n = causal ? t + 1 : T;
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          const double* k = &qkv[(b * T + j) * 3 * C + C + h * hs];
          double s = 0;
          for (int64_t i = 0; i < hs; ++i) s += q[i] * k[i];
          p[j] = s / std::sqrt(static_cast<double>(hs));
          mx = std::max(mx, p[j]);
        }
        for (int64_t j = 0; j < n; ++j) sum += (p[j] = std::exp(p[j] - mx));
        for (int64_t j = 0; j < n; ++j) {
          const double* v = &qkv[(b * T + j) * 3 * C + 2 * C + h * hs];
          for (int64_t i = 0; i < hs; ++i) out[(b * T + t) * C + h * hs + i] += p[j] / sum * v[i];
        }
      }
  return out;
}

struct Case {
  int64_t B, T, C, NH;
  bool causal;
};

class AttentionKernel : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionKernel, ForwardAndBackwardMatchReference) {
  const auto [B, T, C, NH, causal] = GetParam();
  Rng rng(B * 1000 + T * 10 + C + causal);
  auto qkv = random_vector(B * T * 3 * C, rng), dy = random_vector(B * T * C, rng);
  std::vector<float> out(B * T * C), att(B * NH * T * T), datt(B * NH * T * T), dqkv(B * T * 3 * C);
  attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH, causal);
  expect_close(out, attention_ref(to_double(qkv), B, T, C, NH, causal), 1e-5, 1e-4, "out");
  if (causal) {
    for (int64_t bh = 0; bh < B * NH; ++bh)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t j = t + 1; j < T; ++j) ASSERT_EQ(att[(bh * T + t) * T + j], 0.0f);
  }
  attention_backward(dqkv.data(), datt.data(), dy.data(), att.data(), qkv.data(), B, T, C, NH, causal);
  auto f = [&](const std::vector<double>& v) { return dot(attention_ref(v, B, T, C, NH, causal), dy); };
  if (qkv.size() <= 600) {
    expect_close(dqkv, numeric_grad(f, to_double(qkv)), 1e-4, 1e-3, "dqkv");
    return;
  }
  // Long sequences (several causal row blocks of 64): every q, k, v element
  // of the rows at and around block edges, where an off-by-one would show.
  auto x = to_double(qkv);
  std::vector<size_t> picks;
  for (int64_t t : {0, 1, 62, 63, 64, 65, 127, 128, 129, static_cast<int>(T) - 1})
    if (t < T)
      for (int64_t e = 0; e < 3 * C; ++e) picks.push_back(((B - 1) * T + t) * 3 * C + e);
  for (size_t i : picks) {
    const double keep = x[i], eps = 1e-4;
    x[i] = keep + eps;
    const double up = f(x);
    x[i] = keep - eps;
    const double down = f(x);
    x[i] = keep;
    const double g = (up - down) / (2 * eps);
    ASSERT_NEAR(dqkv[i], g, 1e-4 + 1e-3 * std::fabs(g)) << "dqkv at " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionKernel,
                         ::testing::Values(Case{1, 1, 4, 1, true}, Case{2, 5, 8, 2, true}, Case{2, 7, 12, 3, true},
                                           Case{2, 5, 8, 2, false}, Case{3, 6, 6, 3, false},
                                           Case{1, 150, 8, 2, true}, Case{2, 64, 8, 1, true},
                                           Case{1, 129, 8, 2, false}));

}  // namespace
}  // namespace meshtrain::kernels
