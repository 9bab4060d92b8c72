#include "meshtrain/kernels/attention_softmax.hpp"

#include <ostream>

#include "kernel_test_util.hpp"
#include "meshtrain/kernels/bf16_pair_products.hpp"

namespace meshtrain::kernels {
namespace {

using namespace testing;

struct Rows {
  int64_t T, r0, r1;
  bool causal;
};

// Names the case in test names (gtest otherwise prints its bytes, padding included).
void PrintTo(const Rows& r, std::ostream* os) {
  *os << "T" << r.T << " rows " << r.r0 << "-" << r.r1 << (r.causal ? " causal" : " full");
}

class AttentionSoftmaxAvx512 : public ::testing::TestWithParam<Rows> {
 protected:
  void SetUp() override {
    if (!pair_products::available()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  }
};

// Both forms of the rounded forward on the same scores: the same
// probabilities to one bf16 ulp (their exps and sums differ in float
// rounding only), exact zeros past each row's end, rows summing to 1.
TEST_P(AttentionSoftmaxAvx512, ForwardMatchesThePortableLoop) {
  const auto [T, r0, r1, causal] = GetParam();
  Rng rng(T + r0 + causal);
  const auto scores = random_vector(size_t((r1 - r0) * T), rng, 3.0f);
  auto s_portable = scores, s_avx = scores;
  std::vector<Bf16> p_portable(scores.size()), p_avx(scores.size());
  softmax_rows(s_portable.data(), r0, r1, T, causal, p_portable.data());
  softmax_rows_rounded_avx512(s_avx.data(), r0, r1, T, causal, p_avx.data());
  for (int64_t t = r0; t < r1; ++t) {
    const int64_t n = causal ? t + 1 : T;
    double sum = 0;
    for (int64_t j = 0; j < T; ++j) {
      const size_t i = size_t((t - r0) * T + j);
      const float want = to_float(p_portable[i]), got = to_float(p_avx[i]);
      if (j >= n) {
        ASSERT_EQ(p_avx[i].bits, 0) << "row " << t << " column " << j << " past the row's end";
        continue;
      }
      ASSERT_NEAR(got, want, 0x1p-7 * want) << "row " << t << " column " << j;  // one bf16 ulp
      sum += got;
    }
    EXPECT_NEAR(sum, 1.0, n * 0x1p-9) << "row " << t;
  }
}

// The backward: ds to a bf16 ulp of the row's largest (the row's dot
// product sums in another order, and ds = p (dp - dot) can cancel), zeros
// from the row's end up to r1 (causal), columns past that left alone.
TEST_P(AttentionSoftmaxAvx512, BackwardMatchesThePortableLoop) {
  const auto [T, r0, r1, causal] = GetParam();
  Rng rng(T * 3 + r1 + causal);
  auto scores = random_vector(size_t((r1 - r0) * T), rng, 3.0f);
  std::vector<Bf16> p16(scores.size());
  softmax_rows(scores.data(), r0, r1, T, causal, p16.data());
  const auto dp = random_vector(scores.size(), rng);
  const Bf16 sentinel = to_bf16(7.0f);
  std::vector<Bf16> ds_portable(scores.size(), sentinel), ds_avx(scores.size(), sentinel);
  auto dp_copy = dp;
  const float scale = 0.125f;
  softmax_backward_rows(dp_copy.data(), nullptr, p16.data(), r0, r1, T, causal, scale, ds_portable.data());
  softmax_backward_rows_rounded_avx512(dp.data(), p16.data(), r0, r1, T, causal, scale, ds_avx.data());
  for (int64_t t = r0; t < r1; ++t) {
    const int64_t n = causal ? t + 1 : T, end = causal ? r1 : T;
    float largest = 0;
    for (int64_t j = 0; j < n; ++j) largest = std::max(largest, std::fabs(to_float(ds_portable[size_t((t - r0) * T + j)])));
    for (int64_t j = 0; j < T; ++j) {
      const size_t i = size_t((t - r0) * T + j);
      if (j < n)
        ASSERT_NEAR(to_float(ds_avx[i]), to_float(ds_portable[i]), 0x1p-8 * largest) << "row " << t << " column " << j;
      else if (j < end)
        ASSERT_EQ(ds_avx[i].bits, 0) << "row " << t << " column " << j;
      else
        ASSERT_EQ(ds_avx[i].bits, sentinel.bits) << "row " << t << " column " << j << " past r1";
    }
  }
}

// Causal row blocks at the start and further down (partial vectors of
// every length), and whole non-causal rows.
INSTANTIATE_TEST_SUITE_P(Blocks, AttentionSoftmaxAvx512,
                         ::testing::Values(Rows{64, 0, 64, true}, Rows{256, 64, 128, true}, Rows{80, 64, 80, true},
                                           Rows{48, 0, 48, false}, Rows{16, 0, 16, true}));

}  // namespace
}  // namespace meshtrain::kernels
