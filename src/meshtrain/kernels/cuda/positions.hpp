#pragma once
// A learned position added to a sequence's rows on the GPU (kernels/
// embedding.hpp's position_add_*): the ViT's patch positions, a
// sequence-parallel rank's rows. Launched on `stream`, asynchronous.
//
// Bits: forward is one IEEE addition per element and backward adds the
// batch's terms one by one in increasing b from dpos, both the CPU's
// expressions (no FMA contraction): the CPU kernels' bits. No float atomics.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace meshtrain::kernels::cuda {

// x (B, T, C) += pos (T, C), in place.
void position_add_forward(float* x, const float* pos, int64_t B, int64_t T, int64_t C, cudaStream_t stream);
// The same over rows [row0, row0 + rows) of (B T, C), held in x (rows, C):
// x's row i gets pos[(row0 + i) % T].
void position_add_rows_forward(float* x, const float* pos, int64_t row0, int64_t rows, int64_t T, int64_t C,
                               cudaStream_t stream);
// dpos (T, C) += sum over b of dout (B, T, C).
void position_add_backward(float* dpos, const float* dout, int64_t B, int64_t T, int64_t C, cudaStream_t stream);

}  // namespace meshtrain::kernels::cuda
