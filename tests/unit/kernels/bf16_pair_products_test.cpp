#include "meshtrain/kernels/bf16_pair_products.hpp"

#include <algorithm>

#include "kernel_test_util.hpp"
#include "meshtrain/core/aligned_buffer.hpp"

namespace meshtrain::kernels {
namespace {

using namespace testing;
namespace pp = pair_products;

std::vector<Bf16> random_bf16(size_t n, Rng& rng) {
  std::vector<Bf16> v(n);
  for (auto& x : v) x = to_bf16(rng.normal());
  return v;
}

// C = alpha sum_k A(i, k) B(k, n) in double, from element accessors, and
// for each element the bound on fp32's error summing those K exact
// products in any order: K u sum_k |alpha A B|, u = 2^-24 (Higham's gamma_K).
struct Reference {
  std::vector<double> c, bound;
};

template <class A, class B>
Reference reference(int M, int N, int K, double alpha, A a, B b) {
  Reference r{std::vector<double>(size_t(M) * N), std::vector<double>(size_t(M) * N)};
  for (int i = 0; i < M; ++i)
    for (int n = 0; n < N; ++n) {
      double s = 0, abs_sum = 0;
      for (int k = 0; k < K; ++k) {
        const double p = double(a(i, k)) * double(b(k, n));
        s += p;
        abs_sum += std::fabs(p);
      }
      r.c[size_t(i) * N + n] = alpha * s;
      r.bound[size_t(i) * N + n] = (K + 1) * 0x1p-24 * std::fabs(alpha) * abs_sum + 1e-30;
    }
  return r;
}

// c (M rows of stride ldc) against the reference, element by element.
void expect_within_bound(const std::vector<float>& c, int ldc, const Reference& want, int M, int N,
                         const char* what) {
  for (int i = 0; i < M; ++i)
    for (int n = 0; n < N; ++n) {
      const size_t at = size_t(i) * N + n;
      ASSERT_NEAR(c[size_t(i) * ldc + n], want.c[at], want.bound[at]) << what << " at " << i << "," << n;
    }
}

class PairProducts : public ::testing::TestWithParam<std::tuple<int, int, int>> {
 protected:
  void SetUp() override {
    if (!pp::available()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  }
};

// A row-major, B packed from row-major (K x N): the forward's p v and the
// query-side products. Row strides wider than the matrices, as in attention.
TEST_P(PairProducts, RowMajorTimesRowPairs) {
  const auto [M, N, K] = GetParam();
  Rng rng(M * 100 + N * 10 + K);
  const int lda = K + 6, ldb = N + 3, ldp = N + 5;
  auto a = random_bf16(size_t(M) * lda, rng), b = random_bf16(size_t(K) * ldb, rng);
  std::vector<uint32_t> packed(size_t(K / 2) * ldp);
  pp::pack_row_pairs(b.data(), K, N, ldb, packed.data(), ldp);
  std::vector<float> c(size_t(M) * (N + 2), -7.0f);
  pp::product(M, N, K / 2, 0.5f, pp::row_major(a.data(), lda), packed.data(), ldp, c.data(), N + 2);
  const auto want = reference(M, N, K, 0.5, [&](int i, int k) { return to_float(a[size_t(i) * lda + k]); },
                              [&](int k, int n) { return to_float(b[size_t(k) * ldb + n]); });
  expect_within_bound(c, N + 2, want, M, N, "a b");
  for (int i = 0; i < M; ++i) {  // columns past N are left as they were
    EXPECT_EQ(c[size_t(i) * (N + 2) + N], -7.0f);
    EXPECT_EQ(c[size_t(i) * (N + 2) + N + 1], -7.0f);
  }
}

// B = X^T packed from X (N x K) row-major: q k^T and dy v^T.
TEST_P(PairProducts, RowMajorTimesTransposed) {
  const auto [M, N, K] = GetParam();
  Rng rng(M * 7 + N * 3 + K);
  const int lda = K + 2, ldx = K + 4, ldp = N + 1;
  auto a = random_bf16(size_t(M) * lda, rng), x = random_bf16(size_t(N) * ldx, rng);
  std::vector<uint32_t> packed(size_t(K / 2) * ldp);
  pp::pack_transposed(x.data(), N, K, ldx, packed.data(), ldp);
  std::vector<float> c(size_t(M) * N);
  pp::product(M, N, K / 2, 1.0f, pp::row_major(a.data(), lda), packed.data(), ldp, c.data(), N);
  const auto want = reference(M, N, K, 1.0, [&](int i, int k) { return to_float(a[size_t(i) * lda + k]); },
                              [&](int k, int n) { return to_float(x[size_t(n) * ldx + k]); });
  expect_within_bound(c, N, want, M, N, "a x^T");
}

// A = Y^T with Y (K x M) packed in pairs of rows, read down its columns:
// the key side's p^T dy and ds^T q.
TEST_P(PairProducts, TransposedTimesRowPairs) {
  const auto [M, N, K] = GetParam();
  Rng rng(M + N * 5 + K * 11);
  auto y = random_bf16(size_t(K) * M, rng), b = random_bf16(size_t(K) * N, rng);
  std::vector<uint32_t> ya(size_t(K / 2) * M), bp(size_t(K / 2) * N);
  pp::pack_row_pairs(y.data(), K, M, M, ya.data(), M);
  pp::pack_row_pairs(b.data(), K, N, N, bp.data(), N);
  std::vector<float> c(size_t(M) * N);
  pp::product(M, N, K / 2, 1.0f, pp::PackedA{ya.data(), 1, M}, bp.data(), N, c.data(), N);
  const auto want = reference(M, N, K, 1.0, [&](int i, int k) { return to_float(y[size_t(k) * M + i]); },
                              [&](int k, int n) { return to_float(b[size_t(k) * N + n]); });
  expect_within_bound(c, N, want, M, N, "y^T b");
}

// The rounded product is the fp32 one rounded to nearest even, bit for bit.
TEST_P(PairProducts, RoundedIsTheFp32ProductRounded) {
  const auto [M, N, K] = GetParam();
  Rng rng(M * 3 + N + K * 17);
  auto a = random_bf16(size_t(M) * K, rng), b = random_bf16(size_t(K) * N, rng);
  std::vector<uint32_t> packed(size_t(K / 2) * N);
  pp::pack_row_pairs(b.data(), K, N, N, packed.data(), N);
  std::vector<float> c(size_t(M) * N);
  std::vector<Bf16> c16(size_t(M) * N);
  pp::product(M, N, K / 2, 1.0f, pp::row_major(a.data(), K), packed.data(), N, c.data(), N);
  pp::product_rounded(M, N, K / 2, pp::row_major(a.data(), K), packed.data(), N, c16.data(), N);
  for (size_t i = 0; i < c.size(); ++i) ASSERT_EQ(c16[i].bits, to_bf16(c[i]).bits) << i;
}

// The streamed product writes the same values as the plain one, whether
// its rows start on a 64-byte line (non-temporal stores) or not (plain
// stores), and leaves the columns past N alone.
TEST_P(PairProducts, StreamedWritesWhatThePlainProductWrites) {
  const auto [M, N, K] = GetParam();
  Rng rng(M * 5 + N * 13 + K);
  auto a = random_bf16(size_t(M) * K, rng), b = random_bf16(size_t(K) * N, rng);
  std::vector<uint32_t> packed(size_t(K / 2) * N);
  pp::pack_row_pairs(b.data(), K, N, N, packed.data(), N);
  std::vector<float> plain(size_t(M) * N);
  pp::product(M, N, K / 2, 1.0f, pp::row_major(a.data(), K), packed.data(), N, plain.data(), N);
  const int lined = (N + 15) / 16 * 16;  // every row on a line
  for (const int ldc : {lined, N + 1}) {
    AlignedBuffer<float> c(size_t(M) * ldc + 1, MemoryKind::Other);
    std::fill(c.data(), c.data() + c.size(), -7.0f);
    pp::product_streamed(M, N, K / 2, pp::row_major(a.data(), K), packed.data(), N, c.data(), ldc);
    for (int i = 0; i < M; ++i)
      for (int n = 0; n < ldc; ++n) {
        const float want = n < N ? plain[size_t(i) * N + n] : -7.0f;
        ASSERT_EQ(c.data()[size_t(i) * ldc + n], want) << "ldc " << ldc << " at " << i << "," << n;
      }
  }
}

// Tiles of 6 rows and 64 columns with every remainder: M from 1 to past
// two tiles, N whole vectors and partial ones, K down to one pair.
INSTANTIATE_TEST_SUITE_P(Shapes, PairProducts,
                         ::testing::Values(std::tuple{1, 16, 2}, std::tuple{5, 16, 64}, std::tuple{6, 64, 32},
                                           std::tuple{7, 48, 64}, std::tuple{13, 80, 128}, std::tuple{64, 256, 64},
                                           std::tuple{64, 64, 256}, std::tuple{3, 5, 8}, std::tuple{9, 37, 10},
                                           std::tuple{12, 131, 6}));

}  // namespace
}  // namespace meshtrain::kernels
