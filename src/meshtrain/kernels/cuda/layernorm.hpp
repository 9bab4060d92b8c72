#pragma once
// Layer normalization on the GPU over N rows of C floats, as
// kernels/layernorm.hpp (eps 1e-5, biased variance); the per-element steps
// are kernels/layernorm_math.hpp's, the row sums a warp's (so mean, rstd
// and the outputs match the CPU's within rounding, not bit for bit).
// mean and rstd may be null where nobody needs them (inference).
// Launched on `stream`, asynchronous.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "meshtrain/core/bf16.hpp"

namespace meshtrain::kernels::cuda {

// out (N, C), mean (N), rstd (N) written, from inp (N, C), weight (C), bias (C).
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t N, int64_t C, cudaStream_t stream);
// The same with out written only rounded to bf16 (kernels::layernorm_forward_rounded).
void layernorm_forward_rounded(Bf16* out16, float* mean, float* rstd, const float* inp, const float* weight,
                               const float* bias, int64_t N, int64_t C, cudaStream_t stream);

// Fused with the residual add before it (llm.c's fused_residual_forward):
// residual (N, C) = a + b is written (the bits of kernels::residual_forward;
// it may alias a or b), then out, mean, rstd are residual's layer norm, in
// one pass over the rows.
void residual_layernorm_forward(float* residual, float* out, float* mean, float* rstd, const float* a,
                                const float* b, const float* weight, const float* bias, int64_t N, int64_t C,
                                cudaStream_t stream);
void residual_layernorm_forward_rounded(float* residual, Bf16* out16, float* mean, float* rstd, const float* a,
                                        const float* b, const float* weight, const float* bias, int64_t N,
                                        int64_t C, cudaStream_t stream);

// Floats of device scratch layernorm_backward needs: the per-block column
// sums of dweight and dbias.
int64_t layernorm_backward_scratch_floats(int64_t N, int64_t C);

// As kernels::layernorm_backward: dinp (N, C) = dresid + dLN/dinp, written;
// dresid may be null or alias dinp; dout must not alias dinp. dweight,
// dbias (C) are accumulated (+=) with the column sums taken in a fixed
// order (no float atomics): the same inputs give the same bits every run.
// scratch: layernorm_backward_scratch_floats(N, C) floats.
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, const float* dresid, int64_t N,
                        int64_t C, float* scratch, cudaStream_t stream);

}  // namespace meshtrain::kernels::cuda
