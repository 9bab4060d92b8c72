#pragma once
// LAMB's two passes on the GPU (kernels/lamb.hpp's CUDA twins), with the
// CPU's bits: lamb_math.hpp's element steps, and each chunk's sums of
// squares of w and u by kSquaresLanes threads, thread j summing lane j in
// order (norm.hpp's association). The chunk tables and the scales are in
// device memory. Launched on `stream`, asynchronous.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "meshtrain/kernels/lamb_math.hpp"

namespace meshtrain::kernels::cuda {

// Pass 1: every chunk's moments; sums (2 n_chunks): chunk c's sums of
// squares of its parameters, then of its directions u.
void lamb_moments(const LambChunk* chunks, int64_t n_chunks, const LambStep& step, double* sums,
                  cudaStream_t stream);

// Pass 2: w -= scales[view] * u. max_chunk_size, the largest chunk's size,
// sizes the grid.
void lamb_apply(const LambChunk* chunks, int64_t n_chunks, int64_t max_chunk_size, const float* scales,
                const LambStep& step, cudaStream_t stream);

}  // namespace meshtrain::kernels::cuda
