// The GPU backend (kernels/cuda/cuda_backend.hpp) against the CPU backend
// (kernels::cpu_backend()) on the same inputs, method by method, for those
// whose CUDA twins are new: the general products (gemm, gemm_bf16,
// gemm_bf16_rounded), rows and bias gradients, the bf16 GELU's backward with
// its bias gradient, fill, the embedding shard, positions, patches and
// pooling, and the gradient norm's pieces. Ragged shapes (M = 37, N = 99,
// K = 50, odd strides, pointers one element off alignment), every output
// poisoned (NaN bytes) first.
//
// Expectations: the same bits where both compute the same expression per
// element (copies, fills, additions, bf16 rounding, the GELU element, sums
// taken in the CPU's order); 1e-5 relative for fp32 sums in another order
// (kernel_compare.hpp's expect_close: relative to |CPU| + mean |CPU|); 1e-2
// for products rounded to bf16; and every reduction the same bits when run
// twice.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "kernel_compare.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/kernels/cuda/cuda_backend.hpp"
#include "meshtrain/kernels/cuda/cuda_memory.hpp"

namespace meshtrain::kernels::cuda {
namespace {

using test::expect_close;
using test::expect_same_bits;
using test::random_floats;
using test::to_host;

Backend& gpu() { return backend(0); }
Backend& cpu() { return cpu_backend(); }
CudaAllocator& gpu_memory() { return dynamic_cast<CudaAllocator&>(gpu().allocator()); }

template <class T>
DeviceBuffer<T> on_gpu(const std::vector<T>& host) {
  return test::to_device(gpu_memory(), host);
}
template <class T>
DeviceBuffer<T> poisoned(size_t n) {
  return test::poisoned<T>(gpu_memory(), n);
}
template <class T>
std::vector<T> poison_values(size_t n) {
  std::vector<T> v(n);
  std::memset(static_cast<void*>(v.data()), 0xff, n * sizeof(T));
  return v;
}

std::vector<Bf16> bf16_of(const std::vector<float>& v) {
  std::vector<Bf16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = to_bf16(v[i]);
  return out;
}
std::vector<float> floats_of(const std::vector<Bf16>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = to_float(v[i]);
  return out;
}

// The (M, N) region of a matrix with row stride ld (from element `offset`),
// and everything else: the padding and the elements before the offset.
template <class T>
std::vector<T> region(const std::vector<T>& v, int M, int N, int ld, int offset = 0) {
  std::vector<T> out;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) out.push_back(v[size_t(offset) + size_t(i) * ld + j]);
  return out;
}
template <class T>
std::vector<T> outside(const std::vector<T>& v, int M, int N, int ld, int offset = 0) {
  std::vector<T> out;
  for (size_t k = 0; k < v.size(); ++k) {
    const bool before = k < size_t(offset);
    const size_t r = before ? 0 : (k - offset) / ld, c = before ? 0 : (k - offset) % ld;
    if (before || r >= size_t(M) || c >= size_t(N)) out.push_back(v[k]);
  }
  return out;
}

const char* name(Trans t) { return t == Trans::Yes ? "T" : "N"; }

// ---- general products ----

// One product's shape: transposes, padding added to every row stride, and
// an offset of one element on every pointer (alignment 4 for fp32, 2 for
// bf16; the bias then misses the epilogue's 16 bytes).
struct GemmCase {
  Trans ta, tb;
  int pad;
  int offset;
  int M = 37, N = 99, K = 50;
  int lda() const { return (ta == Trans::No ? K : M) + pad; }
  int ldb() const { return (tb == Trans::No ? N : K) + pad; }
  int ldc() const { return N + pad; }
  size_t a_size() const { return size_t(offset) + size_t(ta == Trans::No ? M : K) * lda(); }
  size_t b_size() const { return size_t(offset) + size_t(tb == Trans::No ? K : N) * ldb(); }
  size_t c_size() const { return size_t(offset) + size_t(M) * ldc(); }
  std::string label(const char* what, float alpha, float beta, bool bias) const {
    return std::string(what) + " " + name(ta) + name(tb) + " pad " + std::to_string(pad) + " offset " +
           std::to_string(offset) + " alpha " + std::to_string(alpha) + " beta " + std::to_string(beta) +
           (bias ? " bias" : "");
  }
};

std::vector<GemmCase> gemm_cases() {
  std::vector<GemmCase> cases;
  for (const Trans ta : {Trans::No, Trans::Yes})
    for (const Trans tb : {Trans::No, Trans::Yes})
      for (const int pad : {0, 3})
        for (const int offset : {0, 1}) cases.push_back({ta, tb, pad, offset});
  return cases;
}

struct Scalars {
  float alpha, beta;
};
constexpr Scalars kScalars[] = {{1.0f, 0.0f}, {1.0f, 1.0f}, {0.5f, 1.25f}, {-2.0f, 0.0f}};

TEST(CudaBackend, GemmMatchesCpu) {
  MESHTRAIN_REQUIRE_GPU();
  uint64_t seed = 1;
  for (const GemmCase& g : gemm_cases()) {
    for (const Scalars s : kScalars) {
      const std::vector<float> A = random_floats(g.a_size(), seed++), B = random_floats(g.b_size(), seed++);
      // beta = 0: the GPU's C starts poisoned (it must not be read).
      const std::vector<float> C0 = s.beta == 0.0f ? poison_values<float>(g.c_size()) : random_floats(g.c_size(), seed++);
      std::vector<float> want = s.beta == 0.0f ? std::vector<float>(g.c_size(), 0.0f) : C0;
      cpu().gemm(g.ta, g.tb, g.M, g.N, g.K, s.alpha, A.data() + g.offset, g.lda(), B.data() + g.offset, g.ldb(),
                 s.beta, want.data() + g.offset, g.ldc());
      auto dA = on_gpu(A), dB = on_gpu(B);
      std::vector<float> first;
      for (int run = 0; run < 2; ++run) {
        auto dC = on_gpu(C0);
        gpu().gemm(g.ta, g.tb, g.M, g.N, g.K, s.alpha, dA.ptr().raw() + g.offset, g.lda(),
                   dB.ptr().raw() + g.offset, g.ldb(), s.beta, dC.ptr().raw() + g.offset, g.ldc());
        const std::vector<float> got = to_host(dC);
        const std::string what = g.label("gemm", s.alpha, s.beta, false);
        if (run == 0) {
          expect_close(region(got, g.M, g.N, g.ldc(), g.offset), region(want, g.M, g.N, g.ldc(), g.offset), 1e-5,
                       what.c_str());
          expect_same_bits(outside(got, g.M, g.N, g.ldc(), g.offset), outside(C0, g.M, g.N, g.ldc(), g.offset),
                           (what + " (outside C)").c_str());
          first = got;
        } else {
          expect_same_bits(got, first, (what + ", second run").c_str());
        }
      }
    }
  }
}

TEST(CudaBackend, GemmBf16MatchesCpu) {
  MESHTRAIN_REQUIRE_GPU();
  uint64_t seed = 1000;
  for (const GemmCase& g : gemm_cases()) {
    for (const Scalars s : kScalars) {
      for (const bool with_bias : {false, true}) {
        const std::vector<Bf16> A = bf16_of(random_floats(g.a_size(), seed++));
        const std::vector<Bf16> B = bf16_of(random_floats(g.b_size(), seed++));
        const std::vector<float> bias = random_floats(size_t(g.offset) + g.N, seed++);
        const std::vector<float> C0 =
            s.beta == 0.0f ? poison_values<float>(g.c_size()) : random_floats(g.c_size(), seed++);
        std::vector<float> want = s.beta == 0.0f ? std::vector<float>(g.c_size(), 0.0f) : C0;
        cpu().gemm_bf16(g.ta, g.tb, g.M, g.N, g.K, s.alpha, A.data() + g.offset, g.lda(), B.data() + g.offset,
                        g.ldb(), s.beta, want.data() + g.offset, g.ldc(), with_bias ? bias.data() + g.offset : nullptr);
        auto dA = on_gpu(A), dB = on_gpu(B);
        auto dbias = on_gpu(bias);
        std::vector<float> first;
        for (int run = 0; run < 2; ++run) {
          auto dC = on_gpu(C0);
          gpu().gemm_bf16(g.ta, g.tb, g.M, g.N, g.K, s.alpha, dA.ptr().raw() + g.offset, g.lda(),
                          dB.ptr().raw() + g.offset, g.ldb(), s.beta, dC.ptr().raw() + g.offset, g.ldc(),
                          with_bias ? dbias.ptr().raw() + g.offset : nullptr);
          const std::vector<float> got = to_host(dC);
          const std::string what = g.label("gemm_bf16", s.alpha, s.beta, with_bias);
          if (run == 0) {
            // Exact products, fp32 sums in another order: fp32's tolerance.
            expect_close(region(got, g.M, g.N, g.ldc(), g.offset), region(want, g.M, g.N, g.ldc(), g.offset), 1e-5,
                         what.c_str());
            expect_same_bits(outside(got, g.M, g.N, g.ldc(), g.offset), outside(C0, g.M, g.N, g.ldc(), g.offset),
                             (what + " (outside C)").c_str());
            first = got;
          } else {
            expect_same_bits(got, first, (what + ", second run").c_str());
          }
        }
      }
    }
  }
}

TEST(CudaBackend, GemmBf16RoundedMatchesCpu) {
  MESHTRAIN_REQUIRE_GPU();
  uint64_t seed = 2000;
  for (const GemmCase& g : gemm_cases()) {
    for (const bool with_bias : {false, true}) {
      const std::vector<Bf16> A = bf16_of(random_floats(g.a_size(), seed++));
      const std::vector<Bf16> B = bf16_of(random_floats(g.b_size(), seed++));
      const std::vector<float> bias = random_floats(size_t(g.offset) + g.N, seed++);
      const std::vector<Bf16> C0 = poison_values<Bf16>(g.c_size());
      std::vector<Bf16> want(g.c_size(), Bf16{0});
      cpu().gemm_bf16_rounded(g.ta, g.tb, g.M, g.N, g.K, A.data() + g.offset, g.lda(), B.data() + g.offset, g.ldb(),
                              want.data() + g.offset, g.ldc(), with_bias ? bias.data() + g.offset : nullptr);
      auto dA = on_gpu(A), dB = on_gpu(B);
      auto dbias = on_gpu(bias);
      std::vector<Bf16> first;
      for (int run = 0; run < 2; ++run) {
        auto dC = on_gpu(C0);
        gpu().gemm_bf16_rounded(g.ta, g.tb, g.M, g.N, g.K, dA.ptr().raw() + g.offset, g.lda(),
                                dB.ptr().raw() + g.offset, g.ldb(), dC.ptr().raw() + g.offset, g.ldc(),
                                with_bias ? dbias.ptr().raw() + g.offset : nullptr);
        const std::vector<Bf16> got = to_host(dC);
        const std::string what = g.label("gemm_bf16_rounded", 1.0f, 0.0f, with_bias);
        if (run == 0) {
          expect_close(floats_of(region(got, g.M, g.N, g.ldc(), g.offset)),
                       floats_of(region(want, g.M, g.N, g.ldc(), g.offset)), 1e-2, what.c_str());
          expect_same_bits(outside(got, g.M, g.N, g.ldc(), g.offset), outside(C0, g.M, g.N, g.ldc(), g.offset),
                           (what + " (outside C)").c_str());
          first = got;
        } else {
          expect_same_bits(got, first, (what + ", second run").c_str());
        }
      }
    }
  }
}

// K = 0: C = beta C [+ bias] (0 where beta = 0), bf16(0 + bias) rounded; the
// operands are never read.
TEST(CudaBackend, GemmWithNoInnerDimensionScalesC) {
  MESHTRAIN_REQUIRE_GPU();
  const int M = 5, N = 7, ldc = 9;
  const std::vector<float> C0 = random_floats(size_t(M) * ldc, 1);
  const std::vector<float> bias = random_floats(N, 2);
  auto dbias = on_gpu(bias);
  for (const float beta : {0.0f, 0.5f}) {
    std::vector<float> want = C0, want_bias = C0;
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        const float c = C0[size_t(i) * ldc + j];
        want[size_t(i) * ldc + j] = beta == 0.0f ? 0.0f : beta * c;
        want_bias[size_t(i) * ldc + j] = (beta == 0.0f ? 0.0f : beta * c) + bias[j];
      }
    auto dC = on_gpu(C0);
    gpu().gemm(Trans::No, Trans::No, M, N, 0, 1.0f, nullptr, 1, nullptr, N, beta, dC.ptr().raw(), ldc);
    expect_same_bits(to_host(dC), want, "gemm K = 0");
    auto dC2 = on_gpu(C0);
    gpu().gemm_bf16(Trans::No, Trans::No, M, N, 0, 1.0f, nullptr, 1, nullptr, N, beta, dC2.ptr().raw(), ldc,
                    dbias.ptr().raw());
    expect_same_bits(to_host(dC2), want_bias, "gemm_bf16 K = 0 with bias");
  }
  const std::vector<Bf16> C16 = poison_values<Bf16>(size_t(M) * ldc);
  std::vector<Bf16> want16 = C16;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) want16[size_t(i) * ldc + j] = to_bf16(0.0f + bias[j]);
  auto dC16 = on_gpu(C16);
  gpu().gemm_bf16_rounded(Trans::No, Trans::No, M, N, 0, nullptr, 1, nullptr, N, dC16.ptr().raw(), ldc,
                          dbias.ptr().raw());
  expect_same_bits(to_host(dC16), want16, "gemm_bf16_rounded K = 0 with bias");
}

// ---- rows, bias gradients, fill ----

// Column counts: ragged (one element at a time) and a multiple of 4 (packs).
constexpr int64_t kColumns[] = {99, 100};

TEST(CudaBackend, FillAndAddRowsHaveTheCpuBits) {
  MESHTRAIN_REQUIRE_GPU();
  const int64_t M = 37;
  for (const int64_t N : kColumns) {
    const std::vector<float> bias = random_floats(N, 1), residual = random_floats(M * N, 2);
    const std::vector<float> out0 = random_floats(M * N, 3);
    auto dbias = on_gpu(bias), dres = on_gpu(residual);
    for (const bool with_bias : {false, true}) {
      for (const bool with_residual : {false, true}) {
        const float* b = with_bias ? bias.data() : nullptr;
        const float* r = with_residual ? residual.data() : nullptr;
        const float* db = with_bias ? dbias.ptr().raw() : nullptr;
        const float* dr = with_residual ? dres.ptr().raw() : nullptr;
        const std::string what = "N=" + std::to_string(N) + (with_bias ? " bias" : "") +
                                 (with_residual ? " residual" : "");

        std::vector<float> want(M * N);
        cpu().fill_rows(want.data(), b, r, M, N);
        auto dout = poisoned<float>(M * N);
        gpu().fill_rows(dout.ptr().raw(), db, dr, M, N);
        expect_same_bits(to_host(dout), want, ("fill_rows " + what).c_str());

        std::vector<float> want_add = out0;
        cpu().add_rows(want_add.data(), b, r, M, N);
        auto dadd = on_gpu(out0);
        gpu().add_rows(dadd.ptr().raw(), db, dr, M, N);
        expect_same_bits(to_host(dadd), want_add, ("add_rows " + what).c_str());
      }
    }
  }
}

TEST(CudaBackend, BiasBackwardMatchesCpuAndRepeats) {
  MESHTRAIN_REQUIRE_GPU();
  for (const int64_t M : {int64_t(37), int64_t(1000)}) {  // one chunk of rows and many (rows.hpp)
    for (const int64_t N : kColumns) {
      const std::vector<float> dout = random_floats(M * N, uint64_t(M + N), -2.0f, 2.0f);
      const std::vector<float> dbias0 = random_floats(N, 5);
      const std::string what = "M=" + std::to_string(M) + " N=" + std::to_string(N);

      std::vector<float> want = dbias0;
      cpu().bias_backward(want.data(), dout.data(), M, N);
      std::vector<float> want_r = dbias0;
      std::vector<Bf16> want16(M * N);
      cpu().bias_backward_rounded(want_r.data(), want16.data(), dout.data(), M, N);

      auto ddout = on_gpu(dout);
      std::vector<float> first, first_r;
      for (int run = 0; run < 2; ++run) {
        auto ddbias = on_gpu(dbias0);
        gpu().bias_backward(ddbias.ptr().raw(), ddout.ptr().raw(), M, N);
        auto ddbias_r = on_gpu(dbias0);
        auto ddout16 = poisoned<Bf16>(M * N);
        gpu().bias_backward_rounded(ddbias_r.ptr().raw(), ddout16.ptr().raw(), ddout.ptr().raw(), M, N);
        const std::vector<float> got = to_host(ddbias), got_r = to_host(ddbias_r);
        if (run == 0) {
          expect_close(got, want, 1e-5, ("bias_backward " + what).c_str());
          expect_close(got_r, want_r, 1e-5, ("bias_backward_rounded dbias " + what).c_str());
          expect_same_bits(to_host(ddout16), want16, ("bias_backward_rounded dout16 " + what).c_str());
          first = got;
          first_r = got_r;
        } else {
          expect_same_bits(got, first, ("bias_backward, second run " + what).c_str());
          expect_same_bits(got_r, first_r, ("bias_backward_rounded, second run " + what).c_str());
        }
      }
    }
  }
}

TEST(CudaBackend, GeluBackwardRoundedMatchesCpuAndRepeats) {
  MESHTRAIN_REQUIRE_GPU();
  for (const int64_t M : {int64_t(37), int64_t(1000)}) {
    for (const int64_t N : kColumns) {
      const std::vector<Bf16> inp = bf16_of(random_floats(M * N, uint64_t(3 * M + N), -6.0f, 6.0f));
      const std::vector<Bf16> dout = bf16_of(random_floats(M * N, uint64_t(5 * M + N), -2.0f, 2.0f));
      const std::vector<float> dbias0 = random_floats(N, 7);
      const std::string what = "M=" + std::to_string(M) + " N=" + std::to_string(N);

      std::vector<Bf16> want16(M * N), want16_nb(M * N);
      std::vector<float> want = dbias0;
      cpu().gelu_backward_rounded(want16.data(), want.data(), inp.data(), dout.data(), M, N);
      cpu().gelu_backward_rounded(want16_nb.data(), nullptr, inp.data(), dout.data(), M, N);

      auto dinp = on_gpu(inp), ddout = on_gpu(dout);
      std::vector<float> first;
      for (int run = 0; run < 2; ++run) {
        auto ddbias = on_gpu(dbias0);
        auto ddinp16 = poisoned<Bf16>(M * N);
        gpu().gelu_backward_rounded(ddinp16.ptr().raw(), ddbias.ptr().raw(), dinp.ptr().raw(), ddout.ptr().raw(), M,
                                    N);
        const std::vector<float> got = to_host(ddbias);
        if (run == 0) {
          expect_same_bits(to_host(ddinp16), want16, ("gelu_backward_rounded dinp16 " + what).c_str());
          expect_close(got, want, 1e-5, ("gelu_backward_rounded dbias " + what).c_str());
          first = got;
        } else {
          expect_same_bits(got, first, ("gelu_backward_rounded dbias, second run " + what).c_str());
        }
      }
      auto ddinp16 = poisoned<Bf16>(M * N);
      gpu().gelu_backward_rounded(ddinp16.ptr().raw(), nullptr, dinp.ptr().raw(), ddout.ptr().raw(), M, N);
      expect_same_bits(to_host(ddinp16), want16_nb, ("gelu_backward_rounded without dbias " + what).c_str());
    }
  }
}

TEST(CudaBackend, FillWritesAnyValue) {
  MESHTRAIN_REQUIRE_GPU();
  const size_t n = 1001;
  const float quiet_nan_payload = std::bit_cast<float>(0x7fc01234u);
  for (const float value : {0.0f, -0.0f, 3.5f, -1e-40f, quiet_nan_payload}) {
    for (const size_t offset : {size_t(0), size_t(1)}) {  // packs, and one element at a time
      std::vector<float> want = poison_values<float>(n + offset);
      cpu().fill(want.data() + offset, n, value);
      auto d = poisoned<float>(n + offset);
      gpu().fill(d.ptr().raw() + offset, n, value);
      expect_same_bits(to_host(d), want, ("fill " + std::to_string(value)).c_str());
    }
  }
}

// ---- embedding shard, positions, patches, pooling ----

TEST(CudaBackend, EmbeddingShardHasTheCpuBits) {
  MESHTRAIN_REQUIRE_GPU();
  const int64_t V = 120, v0 = 40, V_rows = 50, N = 111;
  // Tokens over the whole vocabulary, so some fall before, in and after the
  // shard, and the shard's repeat (a few rows many times).
  std::vector<int32_t> tokens(N);
  const std::vector<float> r = random_floats(N, 11, 0.0f, 1.0f);
  for (int64_t n = 0; n < N; ++n) tokens[n] = n % 5 == 0 ? int32_t(v0 + 3) : int32_t(r[n] * float(V - 1));
  tokens[7] = int32_t(v0);
  tokens[8] = int32_t(v0 + V_rows - 1);
  tokens[9] = int32_t(v0 + V_rows);
  tokens[10] = int32_t(v0 - 1);
  auto dtokens = on_gpu(tokens);
  for (const int64_t C : kColumns) {
    const std::vector<float> wte = random_floats(V_rows * C, uint64_t(C));
    const std::vector<float> dout = random_floats(N * C, uint64_t(C + 1));
    const std::vector<float> dwte0 = random_floats(V_rows * C, uint64_t(C + 2));
    const std::string what = " C=" + std::to_string(C);

    std::vector<float> want(N * C);
    cpu().embedding_rows_forward(want.data(), tokens.data(), wte.data(), v0, V_rows, N, C);
    auto dwte = on_gpu(wte);
    auto dout_gpu = poisoned<float>(N * C);
    gpu().embedding_rows_forward(dout_gpu.ptr().raw(), dtokens.ptr().raw(), dwte.ptr().raw(), v0, V_rows, N, C);
    expect_same_bits(to_host(dout_gpu), want, ("embedding_rows_forward" + what).c_str());

    std::vector<float> want_grad = dwte0;
    cpu().embedding_rows_backward(want_grad.data(), dout.data(), tokens.data(), v0, V_rows, N, C);
    auto ddout = on_gpu(dout);
    for (int run = 0; run < 2; ++run) {  // the CPU's order, so its bits, every run
      auto ddwte = on_gpu(dwte0);
      gpu().embedding_rows_backward(ddwte.ptr().raw(), ddout.ptr().raw(), dtokens.ptr().raw(), v0, V_rows, N, C);
      expect_same_bits(to_host(ddwte), want_grad,
                       ("embedding_rows_backward" + what + (run ? ", second run" : "")).c_str());
    }
  }
}

TEST(CudaBackend, PositionAddsHaveTheCpuBits) {
  MESHTRAIN_REQUIRE_GPU();
  const int64_t B = 3, T = 13;
  for (const int64_t C : kColumns) {
    const std::vector<float> pos = random_floats(T * C, uint64_t(C));
    const std::vector<float> x0 = random_floats(B * T * C, uint64_t(C + 1));
    const std::vector<float> dpos0 = random_floats(T * C, uint64_t(C + 2));
    const std::string what = " C=" + std::to_string(C);
    auto dpos = on_gpu(pos);

    std::vector<float> want = x0;
    cpu().position_add_forward(want.data(), pos.data(), B, T, C);
    auto dx = on_gpu(x0);
    gpu().position_add_forward(dx.ptr().raw(), dpos.ptr().raw(), B, T, C);
    expect_same_bits(to_host(dx), want, ("position_add_forward" + what).c_str());

    // A rank's rows starting mid-sequence: rows [5, 35) of (B T, C).
    const int64_t row0 = 5, rows = 30;
    std::vector<float> want_rows(x0.begin(), x0.begin() + rows * C);
    cpu().position_add_rows_forward(want_rows.data(), pos.data(), row0, rows, T, C);
    auto dxr = on_gpu(std::vector<float>(x0.begin(), x0.begin() + rows * C));
    gpu().position_add_rows_forward(dxr.ptr().raw(), dpos.ptr().raw(), row0, rows, T, C);
    expect_same_bits(to_host(dxr), want_rows, ("position_add_rows_forward" + what).c_str());

    std::vector<float> want_grad = dpos0;
    cpu().position_add_backward(want_grad.data(), x0.data(), B, T, C);
    auto dx0 = on_gpu(x0);
    for (int run = 0; run < 2; ++run) {
      auto ddpos = on_gpu(dpos0);
      gpu().position_add_backward(ddpos.ptr().raw(), dx0.ptr().raw(), B, T, C);
      expect_same_bits(to_host(ddpos), want_grad, ("position_add_backward" + what + (run ? ", second run" : "")).c_str());
    }
  }
}

TEST(CudaBackend, PatchifyHasTheCpuBits) {
  MESHTRAIN_REQUIRE_GPU();
  struct Image {
    int64_t B, ch, H, W, P;
  };
  for (const Image im : {Image{2, 3, 12, 12, 4}, Image{3, 1, 13, 10, 3}}) {  // the second: edges left out
    const std::vector<float> pixels = random_floats(im.B * im.ch * im.H * im.W, uint64_t(im.H));
    const int64_t n = im.B * (im.H / im.P) * (im.W / im.P) * im.ch * im.P * im.P;
    std::vector<float> want(n);
    cpu().patchify(want.data(), pixels.data(), im.B, im.ch, im.H, im.W, im.P);
    auto dpixels = on_gpu(pixels);
    auto dpatches = poisoned<float>(n);
    gpu().patchify(dpatches.ptr().raw(), dpixels.ptr().raw(), im.B, im.ch, im.H, im.W, im.P);
    expect_same_bits(to_host(dpatches), want, ("patchify H=" + std::to_string(im.H)).c_str());
  }
}

TEST(CudaBackend, MeanPoolHasTheCpuBitsAndRepeats) {
  MESHTRAIN_REQUIRE_GPU();
  const int64_t B = 3, T = 37;
  for (const int64_t C : kColumns) {
    const std::vector<float> inp = random_floats(B * T * C, uint64_t(C));
    const std::vector<float> dout = random_floats(B * C, uint64_t(C + 1));
    const std::string what = " C=" + std::to_string(C);

    std::vector<float> want(B * C), want_grad(B * T * C);
    cpu().meanpool_forward(want.data(), inp.data(), B, T, C);
    cpu().meanpool_backward(want_grad.data(), dout.data(), B, T, C);
    auto dinp = on_gpu(inp), ddout = on_gpu(dout);
    for (int run = 0; run < 2; ++run) {
      auto dout_gpu = poisoned<float>(B * C);
      gpu().meanpool_forward(dout_gpu.ptr().raw(), dinp.ptr().raw(), B, T, C);
      expect_same_bits(to_host(dout_gpu), want, ("meanpool_forward" + what + (run ? ", second run" : "")).c_str());
    }
    auto ddinp = poisoned<float>(B * T * C);
    gpu().meanpool_backward(ddinp.ptr().raw(), ddout.ptr().raw(), B, T, C);
    expect_same_bits(to_host(ddinp), want_grad, ("meanpool_backward" + what).c_str());
  }
}

// ---- the gradient norm's pieces ----

TEST(CudaBackend, SquaredNormScaleAndSumHaveTheCpuBits) {
  MESHTRAIN_REQUIRE_GPU();
  const size_t n = 3 * 4096 + 123;
  const std::vector<float> x = random_floats(n, 21, -3.0f, 3.0f);
  auto dx = on_gpu(x);
  struct Range {
    size_t begin, end;
  };
  for (const Range r : {Range{0, n}, Range{100, 9000}, Range{4096, 8192}, Range{5, 6}, Range{7, 7}}) {
    const double want = cpu().squared_norm(x.data(), r.begin, r.end);
    for (int run = 0; run < 2; ++run) {
      const double got = gpu().squared_norm(dx.ptr().raw(), r.begin, r.end);
      EXPECT_EQ(std::bit_cast<uint64_t>(got), std::bit_cast<uint64_t>(want))
          << "squared_norm [" << r.begin << ", " << r.end << "): " << got << ", CPU " << want;
    }
  }

  // Many ranges at once (one download): each range's bits, empty ones 0.
  const std::vector<Backend::Range> ranges{{0, n}, {100, 9000}, {4096, 8192}, {7, 7}, {5, 6}, {8000, 12000}};
  std::vector<double> norms(ranges.size(), -1.0);
  gpu().squared_norms(dx.ptr().raw(), ranges, norms.data());
  for (size_t i = 0; i < ranges.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint64_t>(norms[i]),
              std::bit_cast<uint64_t>(cpu().squared_norm(x.data(), ranges[i].begin, ranges[i].end)))
        << "squared_norms range " << i;

  const double want_sum = cpu().sum_in_order(x.data(), 1001);
  const double got_sum = gpu().sum_in_order(dx.ptr().raw(), 1001);
  EXPECT_EQ(std::bit_cast<uint64_t>(got_sum), std::bit_cast<uint64_t>(want_sum)) << got_sum << ", CPU " << want_sum;
  EXPECT_EQ(gpu().sum_in_order(dx.ptr().raw(), 0), 0.0);

  std::vector<float> want_scaled = x;
  cpu().scale(want_scaled.data(), n, 0.37f);
  gpu().scale(dx.ptr().raw(), n, 0.37f);
  expect_same_bits(to_host(dx), want_scaled, "scale");
}

}  // namespace
}  // namespace meshtrain::kernels::cuda
