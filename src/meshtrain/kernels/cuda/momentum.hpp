#pragma once
// SGD's and LARS's update on the GPU (kernels/momentum.hpp's CUDA twins),
// with the CPU's bits: momentum_math.hpp's element step for each element,
// and each chunk's sums of squares by kSquaresLanes threads, thread j
// summing lane j in order (norm.hpp's association). The chunk tables and
// the trust ratios are in device memory. Launched on `stream`, asynchronous.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "meshtrain/kernels/momentum_math.hpp"

namespace meshtrain::kernels::cuda {

// sums (2 n_chunks): chunk c's sums of squares of its parameters, then of
// its gradients; 0 for a chunk that does not decay.
void momentum_squares(const MomentumChunk* chunks, int64_t n_chunks, double* sums, cudaStream_t stream);

// Every chunk's update; trusts: one per view, or null for 1 (SGD).
// max_chunk_size, the largest chunk's size, sizes the grid.
void momentum_update(const MomentumChunk* chunks, int64_t n_chunks, int64_t max_chunk_size, const float* trusts,
                     const MomentumStep& step, cudaStream_t stream);

}  // namespace meshtrain::kernels::cuda
