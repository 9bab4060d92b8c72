#pragma once
// C = alpha * op(A) * op(B) + beta * C, row-major fp32, where op(X) is X or
// X^T. M, N, K are the sizes of op(A) (M x K), op(B) (K x N) and C (M x N);
// lda, ldb, ldc are row strides in elements.
//
// Called from outside a parallel region it uses every OpenMP thread; called
// from inside one (e.g. per attention head) it runs on the calling thread.
namespace meshtrain::kernels {

enum class Trans { No, Yes };

void gemm(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc);

// Name of the GEMM path in use ("onednn", ...), for logs and benchmarks.
const char* gemm_backend_name();

}  // namespace meshtrain::kernels
