#pragma once
// Small bf16 products straight on AVX512-BF16's vdpbf16ps, for attention's
// per-head products (64 query rows, a head's 64 columns, 64-1024 keys).
//
// Why not gemm_bf16: oneDNN runs these shapes through its packing GEMM,
// which packs both operands on every call, about 1.2 us of each 3.5-12 us
// call; a head makes 24 such calls (6 products x 4 row blocks), and most of
// their operands are the same few matrices (a head's K, V, dY, Q, P, dS).
// Here each is packed once per head and every row block reads it.
//
// The layout vdpbf16ps reads: a bf16 matrix X (K x N) "packed in pairs"
// along its reduction dimension K is a (K/2 x N) matrix of 32-bit words,
// word (kp, n) = X[2kp][n] in its low half and X[2kp+1][n] in its high
// half. vdpbf16ps multiplies 16 such words of B by one such word of A
// broadcast and adds both products into 16 fp32 sums.
//
//   C (M x N) = alpha sum_kp A(i, kp) . B(kp, n)
//
// with A given by the address of its word (i, kp): a + i a_row + kp a_pair
// (in words). A row-major bf16 A (M x K, lda) is already packed in pairs
// along K: a_row = lda / 2, a_pair = 1; a transposed one (A = X^T with X
// packed by pack_row_pairs) has a_row = 1, a_pair = X's packed row length.
// Sums run in fp32 in kp order, one sum per output element: each product of
// two bf16 is exact, as in gemm_bf16, but the order (and so the last bits)
// is this kernel's own.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "meshtrain/kernels/bf16.hpp"

namespace meshtrain::kernels::pair_products {

// Whether this CPU has vdpbf16ps (AVX512-BF16, with AVX512BW and VL); nothing
// below may run where it has not.
bool available();

// dst word (kp, n) = (src[2kp][n], src[2kp + 1][n]) for kp < K/2, n < N:
// src (K x N) bf16 with row stride ld; dst rows ldp words apart. K even.
void pack_row_pairs(const Bf16* src, int K, int N, int ld, uint32_t* dst, int ldp);

// dst word (kp, n) = (src[n][2kp], src[n][2kp + 1]): B = src^T packed, for
// src (N x K) bf16 with row stride ld (even). K even.
void pack_transposed(const Bf16* src, int N, int K, int ld, uint32_t* dst, int ldp);

struct PackedA {
  const uint32_t* a;
  int64_t row, pair;  // word (i, kp) at a + i row + kp pair
};

// C (M x N, fp32, row stride ldc) = alpha A B over KP word pairs; B packed,
// rows ldb words apart.
void product(int M, int N, int KP, float alpha, PackedA a, const uint32_t* b, int ldb, float* c, int ldc);
// The same, alpha = 1, with C written by non-temporal stores (rows whose
// start is 64-byte aligned; plain stores elsewhere): for a large output
// that nothing reads soon (attention's dq, dk, dv, read by c_attn's
// backward after the whole layer): each line is written without being
// read first, and the operands keep the cache. Measured on config B's
// attention backward: 7.9 ms -> 6.4-6.5 ms (bench/RESULTS.md).
void product_streamed(int M, int N, int KP, PackedA a, const uint32_t* b, int ldb, float* c, int ldc);
// The same as product() with C written rounded to bf16 (to nearest even), alpha = 1.
void product_rounded(int M, int N, int KP, PackedA a, const uint32_t* b, int ldb, Bf16* c, int ldc);

// C += A B (alpha 1, fp32 C): the sums start from C's values, so a
// product over several blocks of K (flash attention's key and query blocks)
// accumulates in registers, not through a temporary.
void product_accumulate(int M, int N, int KP, PackedA a, const uint32_t* b, int ldb, float* c, int ldc);

// A per-thread buffer of n packed words (the attention kernels' packed
// operands), grown as needed.
inline uint32_t* words(std::vector<uint32_t>& buf, int64_t n) {
  buf.resize(static_cast<size_t>(n));
  return buf.data();
}

// A row-major bf16 matrix (ld even) as a PackedA.
inline PackedA row_major(const Bf16* a, int ld) {
  return {reinterpret_cast<const uint32_t*>(a), ld / 2, 1};
}

}  // namespace meshtrain::kernels::pair_products
