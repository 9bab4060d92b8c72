#pragma once
// The GPT encoder on the GPU: token + position embedding forward, and its
// backward without float atomics (kernels/embedding.hpp has the CPU twins).
// Dims: B batch, T sequence, C channels, V vocabulary. Token ids must
// already be checked to lie in [0, V). Launched on `stream`, asynchronous.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace meshtrain::kernels::cuda {

// out (B, T, C) = wte[tokens[b, t]] + wpe[t]; tokens (B, T), wte (V, C), wpe (>= T, C).
void encoder_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B, int64_t T,
                     int64_t C, cudaStream_t stream);

// Bytes of device scratch encoder_backward needs for B * T tokens (it sorts
// them). Asks CUB, so it needs a current CUDA device; the size depends only
// on B * T and the device: query it once, keep the buffer.
size_t encoder_backward_workspace_bytes(int64_t B, int64_t T);

// dwte (V, C) and dwpe (>= T, C) accumulate (+=) dout (B, T, C), as
// kernels::encoder_backward, with the same bits: each element of dwte and
// dwpe adds its terms one by one in increasing (b, t) order, which is the
// CPU's order. No float atomics: the same inputs give the same bits every
// run. workspace: encoder_backward_workspace_bytes(B, T) bytes, 256-byte
// aligned (cudaMalloc's are).
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B, int64_t T,
                      int64_t C, void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace meshtrain::kernels::cuda
