// kernels::gemm against a naive double-precision reference, over every
// transpose combination, odd and empty sizes, padded leading dims, alpha and
// beta variants, NaN garbage in C with beta = 0, and calls from inside an
// OpenMP parallel region. Each case runs through kernels::gemm (whatever
// MESHTRAIN_GEMM selects) and through the packed AVX-512 kernel directly
// when the CPU has AVX-512.
#include "meshtrain/kernels/gemm.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "meshtrain/kernels/gemm_avx512.hpp"

namespace meshtrain::kernels {
namespace {

struct Case {
  Trans ta, tb;
  int M, N, K;
  float alpha, beta;
  int pad = 0;  // extra elements per row of A, B and C
};

// Stored shapes: A is (M, K) or, transposed, (K, M); B is (K, N) or (N, K).
struct Operands {
  int lda, ldb, ldc;
  std::vector<float> A, B, C;
};

Operands make_operands(const Case& c, std::mt19937& rng, float c_fill_nan) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Operands o;
  int a_rows = c.ta == Trans::No ? c.M : c.K, a_cols = c.ta == Trans::No ? c.K : c.M;
  int b_rows = c.tb == Trans::No ? c.K : c.N, b_cols = c.tb == Trans::No ? c.N : c.K;
  o.lda = a_cols + c.pad;
  o.ldb = b_cols + c.pad;
  o.ldc = c.N + c.pad;
  o.A.resize(size_t(a_rows) * o.lda + 1);
  o.B.resize(size_t(b_rows) * o.ldb + 1);
  o.C.resize(size_t(c.M) * o.ldc + 1);
  for (auto& x : o.A) x = u(rng);
  for (auto& x : o.B) x = u(rng);
  for (auto& x : o.C) x = c_fill_nan ? std::numeric_limits<float>::quiet_NaN() : u(rng);
  return o;
}

// Expected C in double, from the operands before the call.
std::vector<double> reference(const Case& c, const Operands& o) {
  std::vector<double> ref(size_t(c.M) * c.N);
  for (int i = 0; i < c.M; ++i)
    for (int j = 0; j < c.N; ++j) {
      double s = 0;
      for (int k = 0; k < c.K; ++k) {
        double a = c.ta == Trans::No ? o.A[size_t(i) * o.lda + k] : o.A[size_t(k) * o.lda + i];
        double b = c.tb == Trans::No ? o.B[size_t(k) * o.ldb + j] : o.B[size_t(j) * o.ldb + k];
        s += a * b;
      }
      double cin = c.beta == 0.0f ? 0.0 : double(o.C[size_t(i) * o.ldc + j]);
      ref[size_t(i) * c.N + j] = c.alpha * s + c.beta * cin;
    }
  return ref;
}

enum class Path { Public, Packed };

std::vector<Path> paths() {
  if (detail::avx512_gemm_supported()) return {Path::Public, Path::Packed};
  return {Path::Public};
}

void run_gemm(const Case& c, Operands& o, Path path) {
  auto fn = path == Path::Public ? &gemm : &detail::gemm_packed;
  fn(c.ta, c.tb, c.M, c.N, c.K, c.alpha, o.A.data(), o.lda, o.B.data(), o.ldb, c.beta, o.C.data(), o.ldc);
}

// Checks C against the reference, and that padding past each row is untouched.
void expect_matches(const Case& c, const Operands& before, const Operands& after, const std::vector<double>& ref) {
  double tol = 1e-5 * std::sqrt(double(std::max(c.K, 1))) * 4;
  for (int i = 0; i < c.M; ++i) {
    for (int j = 0; j < c.N; ++j) {
      double want = ref[size_t(i) * c.N + j];
      float got = after.C[size_t(i) * after.ldc + j];
      ASSERT_NEAR(got, want, tol * (1.0 + std::abs(want)) * (std::abs(c.alpha) + std::abs(c.beta) + 1))
          << "at (" << i << ", " << j << ") M=" << c.M << " N=" << c.N << " K=" << c.K
          << " ta=" << int(c.ta) << " tb=" << int(c.tb) << " alpha=" << c.alpha << " beta=" << c.beta
          << " pad=" << c.pad;
    }
    for (int j = c.N; j < after.ldc && size_t(i) * after.ldc + j < after.C.size(); ++j) {
      float b = before.C[size_t(i) * before.ldc + j], a = after.C[size_t(i) * after.ldc + j];
      ASSERT_TRUE((std::isnan(a) && std::isnan(b)) || a == b) << "padding of row " << i << " written";
    }
  }
}

void check(const Case& c, unsigned seed = 1, bool nan_c = false) {
  std::mt19937 rng(seed);
  Operands o = make_operands(c, rng, nan_c);
  Operands before = o;
  std::vector<double> ref = reference(c, o);
  for (Path path : paths()) {
    SCOPED_TRACE(path == Path::Public ? gemm_backend_name() : "packed");
    o = before;
    run_gemm(c, o, path);
    expect_matches(c, before, o, ref);
  }
}

const Trans kTrans[] = {Trans::No, Trans::Yes};

TEST(Gemm, AllTransposesOddSizes) {
  const int sizes[] = {1, 3, 17, 33, 65, 130};
  unsigned seed = 0;
  for (Trans ta : kTrans)
    for (Trans tb : kTrans)
      for (int M : sizes)
        for (int N : sizes)
          for (int K : {1, 3, 33, 130}) check({ta, tb, M, N, K, 1.0f, 0.0f}, ++seed);
}

TEST(Gemm, PaddedLeadingDims) {
  for (Trans ta : kTrans)
    for (Trans tb : kTrans) {
      check({ta, tb, 29, 45, 31, 1.0f, 0.0f, 7});
      check({ta, tb, 64, 64, 64, 1.0f, 1.0f, 16});
      check({ta, tb, 15, 33, 300, 0.5f, 0.25f, 3});
    }
}

TEST(Gemm, AlphaBeta) {
  for (Trans ta : kTrans)
    for (Trans tb : kTrans)
      for (float alpha : {1.0f, -0.5f, 2.0f, 0.0f})
        for (float beta : {0.0f, 1.0f, 0.5f, -1.0f}) check({ta, tb, 37, 50, 41, alpha, beta, 1});
}

TEST(Gemm, BetaZeroIgnoresNanInC) {
  for (Trans ta : kTrans)
    for (Trans tb : kTrans) {
      check({ta, tb, 45, 70, 19, 1.0f, 0.0f, 2}, 3, /*nan_c=*/true);
      check({ta, tb, 5, 7, 0, 1.0f, 0.0f, 2}, 3, /*nan_c=*/true);  // K = 0 still clears C
    }
}

TEST(Gemm, EmptyAndDegenerate) {
  for (Trans ta : kTrans)
    for (Trans tb : kTrans) {
      check({ta, tb, 0, 5, 3, 1.0f, 0.0f});
      check({ta, tb, 5, 0, 3, 1.0f, 0.0f});
      check({ta, tb, 4, 6, 0, 1.0f, 0.5f});  // K = 0: C = beta * C
      check({ta, tb, 1, 1, 1, 1.0f, 1.0f});
      check({ta, tb, 1, 200, 1, 1.0f, 0.0f});
      check({ta, tb, 200, 1, 77, 1.0f, 1.0f});
    }
}

// Large enough to use several cache blocks in every dimension and both threads.
TEST(Gemm, LargeBlocked) {
  for (Trans ta : kTrans)
    for (Trans tb : kTrans) check({ta, tb, 301, 2100, 530, 1.0f, 1.0f, 5});
  check({Trans::Yes, Trans::No, 256, 768, 1024, 1.0f, 1.0f});  // dW += X^T dY
}

TEST(Gemm, InsideParallelRegionRunsPerThread) {
  const int heads = 6;
  std::vector<Case> cases;
  std::vector<Operands> ops, before;
  std::vector<std::vector<double>> refs;
  std::mt19937 rng(11);
  for (int h = 0; h < heads; ++h) {
    Case c{h % 2 ? Trans::Yes : Trans::No, h % 3 ? Trans::No : Trans::Yes, 128, 96 + h, 64, 0.125f, 0.0f, 4};
    cases.push_back(c);
    ops.push_back(make_operands(c, rng, true));
    before.push_back(ops.back());
    refs.push_back(reference(c, ops.back()));
  }
  for (Path path : paths()) {
    ops = before;
#pragma omp parallel for num_threads(2)
    for (int h = 0; h < heads; ++h) run_gemm(cases[h], ops[h], path);
    for (int h = 0; h < heads; ++h) expect_matches(cases[h], before[h], ops[h], refs[h]);
  }
}

TEST(Gemm, BackendNamed) { EXPECT_NE(std::string(gemm_backend_name()), ""); }

}  // namespace
}  // namespace meshtrain::kernels
