#pragma once
// The row passes of flash attention (flash_attention.hpp) between its
// products, one block of scores at a time: shared by its two paths, the
// products through gemm/gemm_bf16 (flash_attention.cpp) and the vdpbf16ps
// products on operands packed per head (flash_attention_packed.cpp).
// Internal to kernels/.
#include <algorithm>
#include <cstdint>

#include "meshtrain/kernels/bf16.hpp"

namespace meshtrain::kernels::flash_detail {

// Forward: 64 query rows against 256 keys at a time (a 64 KB score block
// stays in L2 beside the operands). Backward: square blocks of 64, so a
// causal key block's first query block starts at its own first key.
constexpr int64_t kForwardRows = 64, kForwardKeys = 256, kBackwardBlock = 64;

// Keys [j0, j0 + nk) that row t sees: all of them, or under the causal mask
// those at or before t.
inline int64_t visible_keys(int64_t t, int64_t j0, int64_t nk, bool causal) {
  return causal ? std::clamp<int64_t>(t + 1 - j0, 0, nk) : nk;
}

// The online softmax over one block of scores s (rows x nk, row stride ld)
// for query rows r0 + [0, rows): s becomes exp(s - m_new) (zeros where
// masked, also in p16 when given, rounded, row stride ld); m and l (running
// row maximum and sum) move on, and the output accumulated so far (acc,
// rows x hs) is rescaled by exp(m_old - m_new).
void online_softmax_block(float* s, int64_t ld, int64_t rows, int64_t nk, int64_t r0, int64_t j0, bool causal,
                          float* m, float* l, float* acc, int64_t hs, Bf16* p16);

// The end of a row block's forward: out rows r0 + [0, rows) of the head
// (row stride C) = acc / l, fp32 into out or, when out16 is given, rounded
// into it; lse (the head's T) = m + log l.
void finish_rows(const float* acc, const float* m, const float* l, int64_t rows, int64_t r0, int64_t hs, int64_t C,
                 float* out, Bf16* out16, float* lse);

// Backward's probabilities of one block, from the saved log-sum-exp: s
// (rows x nk) becomes p = exp(s - lse) in place, zeros where masked; also
// rounded into p16 when given.
void probabilities_block(float* s, int64_t ld, int64_t rows, int64_t nk, int64_t r0, int64_t j0, bool causal,
                         const float* lse, Bf16* p16);

// The score gradients of one block: ds = p (dp - D) scale, D = dout . out of
// the row; in place of dp, or rounded into ds16 when given.
void score_gradients_block(float* dp, const float* p, int64_t ld, int64_t rows, int64_t nk, int64_t r0,
                           const float* D, float scale, Bf16* ds16);

// D[t] = dout[t] . out[t] over the head's hs columns (row stride C), the
// softmax backward's row term sum_j p dp; fp32, or widened from bf16.
void output_dots(float* D, const float* dout, const float* out, const Bf16* dout16, const Bf16* out16, int64_t T,
                 int64_t C, int64_t hs);

}  // namespace meshtrain::kernels::flash_detail
