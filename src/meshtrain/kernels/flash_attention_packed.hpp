#pragma once
// Flash attention's bf16 products on vdpbf16ps (bf16_pair_products.hpp),
// where the CPU has AVX512-BF16 and T and the head size are multiples of
// 16: each head's q, k, v and output gradient are packed once, and every
// block's product reads them (oneDNN would pack both operands of each small
// block product again). The same blocks, row passes and order of blocks as
// flash_attention.cpp's other path; the sums within a product run in the
// pair kernel's order, so the two agree to float rounding, not bit for bit.
// Internal to kernels/.
#include <cstdint>

#include "meshtrain/kernels/attention.hpp"

namespace meshtrain::kernels::flash_detail {

// Whether bf16 flash attention runs here (the CPU, the shapes, and
// detail::allow_packed_attention_products).
bool flash_packed_products(const AttentionBf16* bf16, int64_t T, int64_t hs);

// As flash_attention_forward / flash_attention_backward under bf16 (q, k,
// v, the output and its gradient from bf16's qkv, out and dout).
void flash_forward_packed(float* lse, const AttentionBf16& bf16, int64_t B, int64_t T, int64_t C, int64_t NH,
                          bool causal);
void flash_backward_packed(float* dqkv, const float* lse, const AttentionBf16& bf16, int64_t B, int64_t T, int64_t C,
                           int64_t NH, bool causal);

}  // namespace meshtrain::kernels::flash_detail
