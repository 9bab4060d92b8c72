#pragma once
// Multi-head self-attention that never stores the (B, NH, T, T)
// probabilities (training.attention = "flash"): flash-style blocks with an
// online softmax (Dao et al., FlashAttention-2) on the CPU.
//
// Same layout and meaning as attention.hpp (qkv (B, T, 3C), heads side by
// side). Forward walks each head by blocks of query rows; for each it runs
// over blocks of keys keeping a running row maximum m and sum l, rescaling
// the output accumulated so far when m grows. It saves the output and the
// per-row log-sum-exp m + log l (B, NH, T): T floats per head instead of
// T^2. Backward recomputes each block's probabilities from the saved
// log-sum-exp, p = exp(s - lse), and takes the softmax's row term from the
// output, sum_j p dp = dout . out, so it needs neither p nor dp whole: per
// head, key blocks outside, query blocks inside; dk and dv accumulate in
// place, dq across key blocks. One more product per block pair than the
// kernel that keeps p (the scores, recomputed), and no T^2 memory.
//
// Deterministic: every head is one task, blocks in a fixed order, no
// atomics. bf16 (AttentionBf16): the products take bf16 operands with fp32
// sums (gemm_bf16): q, k, v rounded, the block's probabilities and score
// gradients rounded as they are computed; the output is written rounded
// when bf16->out is given. The softmax and its statistics stay fp32.
#include <cstdint>

#include "meshtrain/kernels/attention.hpp"

namespace meshtrain::kernels {

// out (B, T, C) and lse (B, NH, T) are written. Under bf16, q, k, v are read
// from bf16->qkv (qkv may be null) and the output goes to bf16->out, rounded,
// when given (out may then be null).
void flash_attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                             bool causal, const AttentionBf16* bf16 = nullptr);

// dqkv (B, T, 3C) is written from dout and forward's out and lse. Under
// bf16, q, k, v, the output and its gradient are read rounded from bf16's
// qkv, out and dout (qkv, out and dout may be null).
void flash_attention_backward(float* dqkv, const float* dout, const float* out, const float* lse, const float* qkv,
                              int64_t B, int64_t T, int64_t C, int64_t NH, bool causal,
                              const AttentionBf16* bf16 = nullptr);

}  // namespace meshtrain::kernels
