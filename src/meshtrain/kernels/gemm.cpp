#include "meshtrain/kernels/gemm.hpp"

#include <dnnl.h>

namespace meshtrain::kernels {

void gemm(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc) {
  if (M == 0 || N == 0) return;
  dnnl_sgemm(trans_a == Trans::Yes ? 'T' : 'N', trans_b == Trans::Yes ? 'T' : 'N', M, N, K, alpha, A, lda, B,
             ldb, beta, C, ldc);
}

const char* gemm_backend_name() { return "onednn"; }

}  // namespace meshtrain::kernels
