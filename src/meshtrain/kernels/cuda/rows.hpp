#pragma once
// Row-broadcast kernels on the GPU (kernels/elementwise.hpp's CPU twins):
// bias and residual fills, fills with a value, bias gradients (column sums
// without float atomics), the bf16 GELU's backward with its bias gradient,
// and the strided row passes the general matrix product needs around
// cuBLASLt (matmul.cpp). (M, N) row-major, rows of N elements unless a row
// stride is given. Launched on `stream`, asynchronous.
//
// Bits: every element-wise result (fill_rows, add_rows, fill, dout16, dinp16,
// the strided passes) is the CPU kernel's expression built without FMA
// contraction, so it has the CPU's bits. Column sums are not the CPU's order
// (which adds row after row into dbias): rows are summed in chunks of
// kColumnSumChunk, in row order, then the chunks' sums in chunk order, then
// added to dbias. The order depends on M and N only: the same inputs give the
// same bits every run.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "meshtrain/core/bf16.hpp"

namespace meshtrain::kernels::cuda {

// out (M, N): each row = bias (N) + residual row, bias or residual alone, or
// zeros; either may be null (kernels::fill_rows).
void fill_rows(float* out, const float* bias, const float* residual, int64_t M, int64_t N, cudaStream_t stream);
// out (M, N) += bias (N) + residual (M, N), each optional (kernels::add_rows:
// out + ((bias or 0) + (residual or 0)), that association).
void add_rows(float* out, const float* bias, const float* residual, int64_t M, int64_t N, cudaStream_t stream);

// dst (n) = value, for any value (-0 and NaN payloads kept).
void fill(float* dst, int64_t n, float value, cudaStream_t stream);

// Rows per chunk of the column sums (see the top).
inline constexpr int64_t kColumnSumChunk = 32;
// Floats of device scratch the column sums of an (M, N) array need: one
// partial row per chunk.
int64_t column_sums_scratch_floats(int64_t M, int64_t N);

// dbias (N) += the column sums of dout (M, N). scratch:
// column_sums_scratch_floats(M, N) floats.
void bias_backward(float* dbias, const float* dout, int64_t M, int64_t N, float* scratch, cudaStream_t stream);
// The same, and dout16 (M, N) = bf16(dout) in the same pass.
void bias_backward_rounded(float* dbias, Bf16* dout16, const float* dout, int64_t M, int64_t N, float* scratch,
                           cudaStream_t stream);
// dinp16 (M, N) = bf16(float(dout) * gelu'(float(inp))) and, when dbias is
// given, dbias (N) += the column sums of the unrounded products
// (kernels::gelu_backward_rounded; gelu_math.hpp's slope, whose bits the
// CPU's table holds). scratch: column_sums_scratch_floats(M, N) floats when
// dbias is given, else unused (may be null).
void gelu_backward_rounded(Bf16* dinp16, float* dbias, const Bf16* inp, const Bf16* dout, int64_t M, int64_t N,
                           float* scratch, cudaStream_t stream);

// The passes of a row-major product (M, N) with row stride ldc that cuBLASLt
// does not make (kernels/gemm_bf16.cpp's fallbacks, same expressions):
// C = (beta == 0 ? 0 : beta * C) [+ bias (N)]: an empty product's result
// (K = 0), or the bias added before a product that accumulates (alpha != 1).
// beta == 0 never reads C.
void scale_add_bias_rows(float* C, int64_t ldc, float beta, const float* bias, int64_t M, int64_t N,
                         cudaStream_t stream);
// C (bf16) = bf16(0 + bias (N)) on every row, or zeros without bias: an empty
// rounded product (K = 0).
void bias_rows_bf16(Bf16* C, int64_t ldc, const float* bias, int64_t M, int64_t N, cudaStream_t stream);
// dst (M, N), row stride ld_dst, = bf16(src (M, N), row stride ld_src).
void to_bf16_rows(Bf16* dst, int64_t ld_dst, const float* src, int64_t ld_src, int64_t M, int64_t N,
                  cudaStream_t stream);

}  // namespace meshtrain::kernels::cuda
