#pragma once
// Row-broadcast and element-wise kernels: bias and residual fills, bias
// gradients, GELU. Every size is in elements.
#include <cstdint>

#include "meshtrain/core/bf16.hpp"

namespace meshtrain::kernels {

// out (M, N): each row = bias (N) + residual row (M, N). Either may be null
// (then it counts as zero). Linear layers call this, then gemm with beta = 1,
// so bias and residual cost no pass of their own after the matmul.
void fill_rows(float* out, const float* bias, const float* residual, int64_t M, int64_t N);
// out (M, N) += bias (N) + residual (M, N), each optional (a row-parallel
// layer's sum, made on every rank, gets its bias and residual once).
void add_rows(float* out, const float* bias, const float* residual, int64_t M, int64_t N);

// dbias (N) += sum over the M rows of dout (M, N).
void bias_backward(float* dbias, const float* dout, int64_t M, int64_t N);
// The same, and dout16 (M, N) = bf16(dout) in the same pass (a bf16 linear
// layer's backward: one read of dout instead of two).
void bias_backward_rounded(float* dbias, Bf16* dout16, const float* dout, int64_t M, int64_t N);

// out = a + b, n elements; out may alias a or b.
void residual_forward(float* out, const float* a, const float* b, int64_t n);

// GELU, tanh approximation (GPT-2's "gelu_new"):
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
void gelu_forward(float* out, const float* inp, int64_t n);
// dinp = gelu'(inp) * dout, written; dinp may alias dout.
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n);

// bf16 products: the GELU writes the operands its neighbours' products read,
// rounded, so no fp32 copy of them is made and read back.
// Forward: out16 = bf16(gelu(inp16)), n elements, from the pre-activation
// c_fc's product wrote rounded (as under PyTorch's autocast, where c_fc's
// output is bf16): the bits of gelu_forward on inp16 widened, then rounded.
void gelu_forward_bf16(Bf16* out16, const Bf16* inp16, int64_t n);
// Backward over (M, N), from the pre-activation and the output gradient in
// bf16 (both widened exactly, computed in fp32): dinp16 =
// bf16(gelu'(inp) * dout) and, when dbias is given, dbias (N) += the column
// sums of the unrounded products (the bits of gelu_backward on the widened
// arrays, rounded, and of bias_backward on its output). The slope is looked
// up by the input's 16 bits (gelu_table.hpp).
void gelu_backward_rounded(Bf16* dinp16, float* dbias, const Bf16* inp, const Bf16* dout, int64_t M, int64_t N);

}  // namespace meshtrain::kernels
