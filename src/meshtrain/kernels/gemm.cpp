// GEMM entry point: picks the path and splits the work between threads.
//
// Paths, chosen once by MESHTRAIN_GEMM (default "onednn"):
//   onednn  oneDNN's dnnl_sgemm (its own JIT AVX-512 kernels, whatever
//           OPENBLAS_CORETYPE says). On our Zen 4-class VMs a zmm FMA issues
//           once per cycle, the same flops as AVX2, and oneDNN measured 3-10%
//           ahead of the packed kernel on every model shape (bench/RESULTS.md).
//   packed  the packed AVX-512 kernel in gemm_avx512.cpp; used only when the
//           CPU has AVX-512, else oneDNN.
//
// Threads (packed): outside a parallel region C is cut into one slab per
// OpenMP thread, along M when M >= N else along N, at tile boundaries; each
// thread packs its own panels. Inside a parallel region (attention runs one
// head per thread) the call stays on the calling thread. oneDNN follows the
// same rule by itself.
#include "meshtrain/kernels/gemm.hpp"

#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "meshtrain/kernels/gemm_avx512.hpp"

namespace meshtrain::kernels {
namespace {

bool use_packed() {
  static const bool packed = [] {
    const char* env = std::getenv("MESHTRAIN_GEMM");  // "onednn" (default) or "packed"
    return env && std::strcmp(env, "packed") == 0 && detail::avx512_gemm_supported();
  }();
  return packed;
}

// Below this many multiply-adds, starting a parallel region costs more than
// the second thread saves (measured with bench_gemm).
constexpr double kMinParallelMacs = 1 << 18;

void gemm_onednn(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
                 int ldb, float beta, float* C, int ldc) {
  if (K == 0) {  // dnnl_sgemm 2.6 leaves C untouched when K = 0; the contract is C = beta * C
    for (int i = 0; i < M; ++i) {
      float* c = C + size_t(i) * ldc;
      if (beta == 0.0f) std::memset(c, 0, sizeof(float) * N);
      else for (int j = 0; j < N; ++j) c[j] *= beta;
    }
    return;
  }
  dnnl_sgemm(ta == Trans::Yes ? 'T' : 'N', tb == Trans::Yes ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta,
             C, ldc);
}

// [begin, end) of `units` tiles for thread t of nt, as even as possible.
std::pair<int, int> share(int units, int t, int nt) {
  int base = units / nt, extra = units % nt;
  int begin = t * base + std::min(t, extra);
  return {begin, begin + base + (t < extra ? 1 : 0)};
}

}  // namespace

void gemm(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc) {
  if (M <= 0 || N <= 0) return;
  if (use_packed()) detail::gemm_packed(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else gemm_onednn(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

const char* gemm_backend_name() { return use_packed() ? "avx512-packed" : "onednn"; }

namespace detail {

void gemm_packed(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                 const float* B, int ldb, float beta, float* C, int ldc) {
  if (M <= 0 || N <= 0) return;

  const double macs = double(M) * N * std::max(K, 1);
  int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (macs < kMinParallelMacs) nt = 1;
  const bool split_m = M >= N;
  const int tile = split_m ? kGemmMR : kGemmNR;
  const int tiles = ((split_m ? M : N) + tile - 1) / tile;
  nt = std::min(nt, tiles);
  if (nt <= 1) {
    gemm_avx512_st(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }

#pragma omp parallel num_threads(nt)
  {
    auto [t0, t1] = share(tiles, omp_get_thread_num(), omp_get_num_threads());
    if (split_m) {
      // Rows [r0, r1) of C: rows of op(A), i.e. rows of A or columns of A^T.
      int r0 = t0 * tile, r1 = std::min(M, t1 * tile);
      if (r1 > r0) {
        const float* a = trans_a == Trans::No ? A + size_t(r0) * lda : A + r0;
        gemm_avx512_st(trans_a, trans_b, r1 - r0, N, K, alpha, a, lda, B, ldb, beta,
                               C + size_t(r0) * ldc, ldc);
      }
    } else {
      // Columns [c0, c1) of C: columns of op(B), i.e. columns of B or rows of B^T.
      int c0 = t0 * tile, c1 = std::min(N, t1 * tile);
      if (c1 > c0) {
        const float* b = trans_b == Trans::No ? B + c0 : B + size_t(c0) * ldb;
        gemm_avx512_st(trans_a, trans_b, M, c1 - c0, K, alpha, A, lda, b, ldb, beta, C + c0, ldc);
      }
    }
  }
}

}  // namespace detail
}  // namespace meshtrain::kernels
