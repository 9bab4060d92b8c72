#pragma once
// Packed, cache-blocked AVX-512 SGEMM (GotoBLAS/BLIS scheme), internal to
// gemm.cpp. Same argument meaning as kernels::gemm; runs on the calling
// thread only. Callers split C between threads themselves.
#include "meshtrain/kernels/gemm.hpp"

namespace meshtrain::kernels::detail {

// True when the CPU and OS support the AVX-512 subset the kernel uses.
bool avx512_gemm_supported();

// kernels::gemm on the packed kernel whatever MESHTRAIN_GEMM says, with the
// same threading contract. Requires avx512_gemm_supported().
void gemm_packed(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                 const float* B, int ldb, float beta, float* C, int ldc);

// Single-threaded C = alpha * op(A) * op(B) + beta * C. Requires
// avx512_gemm_supported(); M, N > 0, K >= 0.
void gemm_avx512_st(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, const float* A,
                    int lda, const float* B, int ldb, float beta, float* C, int ldc);

// Register tile of the microkernel: MR rows x NR columns of C. Thread splits
// are aligned to these so no tile straddles two threads.
inline constexpr int kGemmMR = 14;
inline constexpr int kGemmNR = 32;

// Cache blocking (see gemm_avx512.cpp): an MR x kc panel of op(A) stays in
// L1, kc x nc of op(B) in L2, mc x kc of op(A) in L3. Defaults were tuned
// with bench_gemm --sweep.
struct GemmBlocking {
  int mc = 14 * 37;
  int kc = 512;
  int nc = 32 * 12;
};
GemmBlocking gemm_blocking();
// For benchmarks that sweep the blocking; not thread-safe against running GEMMs.
void set_gemm_blocking(GemmBlocking b);

}  // namespace meshtrain::kernels::detail
