#pragma once
// GELU (tanh approximation, GPT-2's "gelu_new") on the GPU: the same
// formulas as the CPU's (kernels/gelu_math.hpp), built without FMA
// contraction, so every finite result has the CPU kernels' bits
// (kernels/elementwise.hpp). Launched on `stream`, asynchronous.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "meshtrain/core/bf16.hpp"

namespace meshtrain::kernels::cuda {

// out (n) = gelu(inp (n)); out may alias inp.
void gelu_forward(float* out, const float* inp, int64_t n, cudaStream_t stream);
// dinp (n) = gelu'(inp) * dout, written; dinp may alias dout.
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n, cudaStream_t stream);

// bf16 in, bf16 out, fp32 inside: out16 = bf16(gelu(float(inp16))), the
// bits of kernels::gelu_forward_bf16.
void gelu_forward_bf16(Bf16* out16, const Bf16* inp16, int64_t n, cudaStream_t stream);
// dinp16 = bf16(gelu'(float(inp16)) * float(dout16)), the bits of
// kernels::gelu_backward_rounded without a bias gradient; dinp16 may alias dout16.
void gelu_backward_bf16(Bf16* dinp16, const Bf16* inp16, const Bf16* dout16, int64_t n, cudaStream_t stream);

}  // namespace meshtrain::kernels::cuda
