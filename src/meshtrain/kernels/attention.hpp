#pragma once
// Multi-head self-attention on a fused qkv projection.
//
// Dims: B batch, T sequence, C channels, NH heads, hs = C / NH head size.
// qkv (B, T, 3C) holds q, k, v side by side in each row; head h of q is
// columns [h*hs, (h+1)*hs), of k the same plus C, of v plus 2C.
// Per (b, h):  att = softmax(q k^T / sqrt(hs) [+ causal mask]),  out = att v.
// Each (b, h) is one task of a `parallel for`; inside it gemm runs on the
// calling thread, straight on the strided qkv rows (no head transposes).
//
// bf16 (training.precision = "bf16", AttentionBf16 below): the six
// products per head take bf16 operands with fp32 sums, on operands packed
// once per head (bf16_pair_products.hpp) where the CPU has AVX512-BF16 and
// T and hs are multiples of 16, else through gemm_bf16.hpp. The
// probabilities are stored rounded to bf16, half the bytes of the one
// activation that grows with T^2; the products read them as they are. The
// scores, the softmax and its backward are computed in fp32 (the backward
// widens the stored probabilities); the score gradients are rounded as they
// are computed, into a per-thread (T, T) buffer the products read.
#include <cstdint>

#include "meshtrain/kernels/bf16.hpp"

namespace meshtrain::kernels {

// The bf16 side of the kernels: qkv rounded (read), the probabilities
// (written by forward, read by backward), in forward optionally the output
// rounded and, in backward, dout rounded. With it the fp32 att and qkv are
// not read (either may be null), nor the fp32 dout in backward.
struct AttentionBf16 {
  const Bf16* qkv = nullptr;   // (B, T, 3C)
  Bf16* att = nullptr;         // (B, NH, T, T)
  Bf16* out = nullptr;         // (B, T, C), forward: when given, the output is written here, rounded, not to out
  const Bf16* dout = nullptr;  // (B, T, C), backward only
};

// out (B, T, C) and att (B, NH, T, T) are written; att (the probabilities,
// exact zeros above the diagonal when causal) is saved for backward; under
// bf16, bf16->att instead. With out null (and no bf16->out) the output
// product is skipped: a recomputation that needs only the probabilities.
void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t C,
                       int64_t NH, bool causal, const AttentionBf16* bf16 = nullptr);

// dqkv (B, T, 3C) is written. datt (B, NH, T, T) is scratch, overwritten;
// under bf16 it is not used (may be null): the score gradients live in a
// per-thread row block.
void attention_backward(float* dqkv, float* datt, const float* dout, const float* att, const float* qkv,
                        int64_t B, int64_t T, int64_t C, int64_t NH, bool causal,
                        const AttentionBf16* bf16 = nullptr);

// Which products bf16 attention runs here, for the log: "vdpbf16ps on
// operands packed per head" where the CPU has AVX512-BF16 (for head sizes
// and sequence lengths that are multiples of 16; oneDNN's otherwise), else
// "oneDNN (gemm_bf16)".
const char* attention_bf16_products_name();

namespace detail {
// Whether bf16 attention may use its packed products (the default, where
// the CPU and shapes allow: attention.cpp); false forces the oneDNN path
// (for tests that compare the two).
void allow_packed_attention_products(bool allowed);
bool packed_attention_products_allowed();
}  // namespace detail

}  // namespace meshtrain::kernels
