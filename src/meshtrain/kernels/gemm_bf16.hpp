#pragma once
// C = alpha * op(A) * op(B) + beta * C with A and B in bf16 and C in fp32:
// each product of two bf16 numbers is exact in fp32 and the sums run in
// fp32, as on the CPU's matrix units (AMX tiles, AVX512-BF16's vdpbf16ps).
// Same argument meaning and threading contract as kernels::gemm.
//
// Paths, chosen once per process from what the CPU has (logged by
// gemm_bf16_backend_name()):
//   onednn    oneDNN's matmul primitive, which dispatches AMX, AVX512-BF16
//             or AVX512 at run time, whatever the build's -march says.
//   widened   where oneDNN has only its reference kernel for bf16 (no
//             AVX-512): both operands widened to fp32 (exactly) and
//             kernels::gemm. The same products and fp32 sums, only slower.
#include "meshtrain/kernels/bf16.hpp"
#include "meshtrain/kernels/gemm.hpp"

namespace meshtrain::kernels {

// bias (N), when given, is added to every row of the result:
// C = alpha op(A) op(B) + bias + beta C.
void gemm_bf16(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, const Bf16* A, int lda,
               const Bf16* B, int ldb, float beta, float* C, int ldc, const float* bias = nullptr);

// C (bf16) = bf16(op(A) op(B) [+ bias]): the fp32 sums rounded to nearest
// even as oneDNN stores them, for a product whose only reader wants it in
// bf16 (no fp32 copy written and rounded after). Where oneDNN has no bf16
// kernel: through fp32, rounded by to_bf16.
void gemm_bf16_rounded(Trans trans_a, Trans trans_b, int M, int N, int K, const Bf16* A, int lda, const Bf16* B,
                       int ldb, Bf16* C, int ldc, const float* bias = nullptr);

// "onednn <implementation>" (e.g. "onednn brg:avx512_core_amx") or "widened fp32".
const char* gemm_bf16_backend_name();

namespace detail {
// The widened path whatever the CPU has (for tests).
void gemm_bf16_widened(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, const Bf16* A, int lda,
                       const Bf16* B, int ldb, float beta, float* C, int ldc);
}  // namespace detail

}  // namespace meshtrain::kernels
