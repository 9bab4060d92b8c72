// fp32 <-> bf16 conversion (round to nearest even, NaN, infinities, the
// largest finite values) and kernels::gemm_bf16 against a double-precision
// reference over the bf16 operands, on every transpose combination, odd and
// empty sizes, padded strides, alpha and beta, and inside a parallel region.
#include "meshtrain/kernels/bf16.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "meshtrain/kernels/gemm_bf16.hpp"

namespace meshtrain::kernels {
namespace {

float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

TEST(Bf16, RoundsToNearestEven) {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: the tie goes to even (1).
  EXPECT_EQ(to_bf16(from_bits(0x3f808000u)).bits, 0x3f80);
  // 1 + 3 * 2^-8: halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up to even.
  EXPECT_EQ(to_bf16(from_bits(0x3f818000u)).bits, 0x3f82);
  // Just above and below a tie go to the nearer neighbour.
  EXPECT_EQ(to_bf16(from_bits(0x3f808001u)).bits, 0x3f81);
  EXPECT_EQ(to_bf16(from_bits(0x3f807fffu)).bits, 0x3f80);
  EXPECT_EQ(to_bf16(-1.0f).bits, 0xbf80);
  EXPECT_EQ(to_float(to_bf16(0.0f)), 0.0f);
  EXPECT_TRUE(std::signbit(to_float(to_bf16(-0.0f))));
}

TEST(Bf16, KeepsSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(to_float(to_bf16(inf)), inf);
  EXPECT_EQ(to_float(to_bf16(-inf)), -inf);
  EXPECT_TRUE(std::isnan(to_float(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload sits only in the dropped bits must not become infinity.
  EXPECT_TRUE(std::isnan(to_float(to_bf16(from_bits(0x7f800001u)))));
  // fp32's largest finite value rounds past bf16's largest: infinity, as IEEE says.
  EXPECT_EQ(to_float(to_bf16(std::numeric_limits<float>::max())), inf);
  EXPECT_EQ(to_float(to_bf16(from_bits(0x7f7f0000u))), from_bits(0x7f7f0000u));
  // Subnormals keep their top bits.
  EXPECT_EQ(to_bf16(from_bits(0x00010000u)).bits, 0x0001);
}

TEST(Bf16, ArraysMatchTheScalarConversionAndWidenExactly) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const size_t n = 200003;  // large enough to split over threads, odd
  std::vector<float> x(n), back(n);
  for (auto& v : x) v = normal(rng);
  std::vector<Bf16> h(n);
  to_bf16(x.data(), h.data(), n);
  to_float(h.data(), back.data(), n);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(h[i].bits, to_bf16(x[i]).bits) << i;
    ASSERT_EQ(back[i], to_float(h[i])) << i;
    // Relative error at most half an ulp of an 8-bit significand.
    ASSERT_LE(std::abs(back[i] - x[i]), std::ldexp(std::abs(x[i]), -8)) << i;
  }
}

TEST(Bf16, WidenDividedDividesEachWidenedValue) {
  // Data parallelism's bf16 wire: a sum of 3 ranks averaged by division
  // (not by a multiplication by 1/3, which differs in the last bit).
  const size_t n = 200003;
  std::vector<Bf16> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = Bf16{uint16_t(i * 7919)};
  std::vector<float> out(n);
  widen_divided(h.data(), out.data(), n, 3.0f);
  size_t differs_from_reciprocal = 0;
  for (size_t i = 0; i < n; ++i) {
    const float want = to_float(h[i]) / 3.0f;
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(out[i])) << i;
      continue;
    }
    ASSERT_EQ(out[i], want) << i;
    differs_from_reciprocal += out[i] != to_float(h[i]) * (1.0f / 3.0f);
  }
  EXPECT_GT(differs_from_reciprocal, 0u);
}

struct Case {
  Trans ta, tb;
  int M, N, K;
  float alpha, beta;
  int pad = 0;
};

struct Operands {
  int lda, ldb, ldc;
  std::vector<Bf16> A, B;
  std::vector<float> C;
};

Operands make_operands(const Case& c, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Operands o;
  const int a_rows = c.ta == Trans::No ? c.M : c.K, a_cols = c.ta == Trans::No ? c.K : c.M;
  const int b_rows = c.tb == Trans::No ? c.K : c.N, b_cols = c.tb == Trans::No ? c.N : c.K;
  o.lda = a_cols + c.pad;
  o.ldb = b_cols + c.pad;
  o.ldc = c.N + c.pad;
  o.A.resize(size_t(a_rows) * o.lda);
  o.B.resize(size_t(b_rows) * o.ldb);
  o.C.resize(size_t(c.M) * o.ldc);
  for (auto& x : o.A) x = to_bf16(u(rng));
  for (auto& x : o.B) x = to_bf16(u(rng));
  for (auto& x : o.C) x = c.beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : u(rng);
  return o;
}

// Checks C against double sums of the bf16 operands' exact products; the
// bound is fp32 summation's, K ulps of the sum of |products|.
void check(const Case& c, const Operands& before, const std::vector<float>& C) {
  for (int i = 0; i < c.M; ++i)
    for (int j = 0; j < c.N; ++j) {
      double s = 0, mag = 0;
      for (int k = 0; k < c.K; ++k) {
        const double a = to_float(c.ta == Trans::No ? before.A[size_t(i) * before.lda + k]
                                                     : before.A[size_t(k) * before.lda + i]);
        const double b = to_float(c.tb == Trans::No ? before.B[size_t(k) * before.ldb + j]
                                                     : before.B[size_t(j) * before.ldb + k]);
        s += a * b;
        mag += std::abs(a * b);
      }
      const double cin = c.beta == 0.0f ? 0.0 : before.C[size_t(i) * before.ldc + j];
      const double want = c.alpha * s + c.beta * cin;
      const double tol = 1e-6 * (std::abs(c.alpha) * mag + std::abs(c.beta * cin)) * std::max(1, c.K / 64) + 1e-6;
      ASSERT_NEAR(C[size_t(i) * before.ldc + j], want, tol)
          << "M" << c.M << " N" << c.N << " K" << c.K << " ta" << int(c.ta) << " tb" << int(c.tb) << " at (" << i
          << ", " << j << ")";
    }
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (Trans ta : {Trans::No, Trans::Yes})
    for (Trans tb : {Trans::No, Trans::Yes}) {
      all.push_back({ta, tb, 1, 1, 1, 1.0f, 0.0f});
      all.push_back({ta, tb, 17, 33, 65, 1.0f, 0.0f});
      all.push_back({ta, tb, 64, 96, 384, 1.0f, 1.0f});
      all.push_back({ta, tb, 31, 7, 129, 0.5f, 1.0f, 3});
      all.push_back({ta, tb, 128, 160, 96, -2.0f, 0.25f, 5});
    }
  return all;
}

using Gemm = void (*)(Trans, Trans, int, int, int, float, const Bf16*, int, const Bf16*, int, float, float*, int);

void plain_gemm_bf16(Trans ta, Trans tb, int M, int N, int K, float alpha, const Bf16* A, int lda, const Bf16* B,
                     int ldb, float beta, float* C, int ldc) {
  gemm_bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void run_all(Gemm gemm, bool nested) {
  std::mt19937 rng(11);
  for (const Case& c : cases()) {
    Operands o = make_operands(c, rng);
    const Operands before = o;
    if (nested) {
      std::vector<std::vector<float>> outs(2, o.C);
#pragma omp parallel num_threads(2)
      {
        auto& C = outs[omp_get_thread_num()];
        gemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, o.A.data(), o.lda, o.B.data(), o.ldb, c.beta, C.data(), o.ldc);
      }
      check(c, before, outs[0]);
      check(c, before, outs[1]);
    } else {
      gemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, o.A.data(), o.lda, o.B.data(), o.ldb, c.beta, o.C.data(), o.ldc);
      check(c, before, o.C);
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(GemmBf16, MatchesTheReferenceOnEveryTransposeAndStride) {
  std::printf("bf16 GEMM path: %s\n", gemm_bf16_backend_name());
  run_all(&plain_gemm_bf16, false);
}

TEST(GemmBf16, InsideAParallelRegionRunsOnTheCallingThread) { run_all(&plain_gemm_bf16, true); }

// A bias row: oneDNN's epilogue (alpha 1) or a first pass (otherwise), the
// same sums as adding it to the product's fp32 result, within fp32 rounding.
TEST(GemmBf16, BiasIsAddedToEveryRow) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const Case& c : cases()) {
    Operands o = make_operands(c, rng);
    std::vector<float> bias(static_cast<size_t>(c.N));
    for (float& b : bias) b = u(rng);
    std::vector<float> want = o.C, got = o.C;
    gemm_bf16(c.ta, c.tb, c.M, c.N, c.K, c.alpha, o.A.data(), o.lda, o.B.data(), o.ldb, c.beta, want.data(), o.ldc);
    for (int i = 0; i < c.M; ++i)
      for (int j = 0; j < c.N; ++j) want[size_t(i) * o.ldc + j] += bias[size_t(j)];
    gemm_bf16(c.ta, c.tb, c.M, c.N, c.K, c.alpha, o.A.data(), o.lda, o.B.data(), o.ldb, c.beta, got.data(), o.ldc,
              bias.data());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-5f * (1 + std::fabs(want[i]))) << c.M << "x" << c.N << "x" << c.K << " at " << i;
  }
}

TEST(GemmBf16, WidenedFallbackMatchesTheReference) { run_all(&detail::gemm_bf16_widened, false); }

// A bf16 result is the fp32 one rounded to nearest even: what oneDNN stores
// when it writes bf16 is what to_bf16 makes of the fp32 result, bias included.
TEST(GemmBf16, RoundedResultIsTheFp32ResultRounded) {
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const Case& c : cases()) {
    Operands o = make_operands(c, rng);
    std::vector<float> bias(static_cast<size_t>(c.N)), fp32(o.C.size());
    for (float& b : bias) b = u(rng);
    for (bool with_bias : {false, true}) {
      const float* b = with_bias ? bias.data() : nullptr;
      gemm_bf16(c.ta, c.tb, c.M, c.N, c.K, 1.0f, o.A.data(), o.lda, o.B.data(), o.ldb, 0.0f, fp32.data(), o.ldc, b);
      std::vector<Bf16> rounded(o.C.size(), Bf16{0x7fc0});  // NaN: the stride's gaps stay untouched
      gemm_bf16_rounded(c.ta, c.tb, c.M, c.N, c.K, o.A.data(), o.lda, o.B.data(), o.ldb, rounded.data(), o.ldc, b);
      for (int i = 0; i < c.M; ++i)
        for (int j = 0; j < c.N; ++j) {
          const size_t at = size_t(i) * o.ldc + j;
          ASSERT_EQ(rounded[at].bits, to_bf16(fp32[at]).bits)
              << c.M << "x" << c.N << "x" << c.K << " bias " << with_bias << " at " << i << "," << j;
        }
      for (size_t at = 0; at < rounded.size(); ++at)
        if (int(at % o.ldc) >= c.N) {
          ASSERT_EQ(rounded[at].bits, 0x7fc0) << "wrote past a row at " << at;
        }
    }
  }
}

TEST(GemmBf16, EmptyInnerDimensionScalesC) {
  std::vector<float> C = {1, 2, 3, 4};
  gemm_bf16(Trans::No, Trans::No, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.5f, C.data(), 2);
  EXPECT_EQ(C, (std::vector<float>{0.5f, 1, 1.5f, 2}));
  gemm_bf16(Trans::No, Trans::No, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.0f, C.data(), 2);
  EXPECT_EQ(C, (std::vector<float>{0, 0, 0, 0}));
  gemm_bf16(Trans::No, Trans::No, 0, 2, 3, 1.0f, nullptr, 3, nullptr, 2, 0.0f, nullptr, 2);  // nothing to do
}

}  // namespace
}  // namespace meshtrain::kernels
