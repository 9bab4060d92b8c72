#pragma once
// kernels/norm.hpp's chunked sum of squares and its scaling on the GPU, with
// the CPU's bits: each chunk's sum of squares is sum_squares's expression
// (8 interleaved double lanes, each summed in order, combined in lane order;
// no FMA contraction), written per chunk; the caller adds the chunks' sums
// in chunk order (on the host: the result goes there anyway). Launched on
// `stream`, asynchronous.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace meshtrain::kernels::cuda {

// How many chunks [begin, end) of base spans (norm.hpp: cut at multiples of
// kNormChunkElems counted from base); 0 for an empty range.
int64_t squared_norm_chunks(size_t begin, size_t end);

// partials (squared_norm_chunks(begin, end)) = each chunk's sum of the
// squares of base[i], i in [begin, end), in chunk order.
void chunk_sum_squares(double* partials, const float* base, size_t begin, size_t end, cudaStream_t stream);

// x (n) *= factor (the bits of kernels::scale).
void scale(float* x, int64_t n, float factor, cudaStream_t stream);

}  // namespace meshtrain::kernels::cuda
