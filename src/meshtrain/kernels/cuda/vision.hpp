#pragma once
// Image patches and mean pooling on the GPU (kernels/embedding.hpp's
// patchify and meanpool_*), the ViT's first and last steps. Launched on
// `stream`, asynchronous.
//
// Bits: patchify copies; meanpool_forward sums t = 0 .. T-1 in order from 0
// and multiplies by 1.0f / T, meanpool_backward multiplies by the same: the
// CPU's expressions (no FMA contraction), so the CPU kernels' bits.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace meshtrain::kernels::cuda {

// pixels (B, ch, H, W) planar -> patches (B, (H/P) * (W/P), ch * P * P),
// the patch grid row-major, each patch flattened as (ch, py, px).
void patchify(float* patches, const float* pixels, int64_t B, int64_t ch, int64_t H, int64_t W, int64_t P,
              cudaStream_t stream);
// out (B, C) = mean over t of inp (B, T, C).
void meanpool_forward(float* out, const float* inp, int64_t B, int64_t T, int64_t C, cudaStream_t stream);
// dinp (B, T, C) = dout (B, C) / T, written.
void meanpool_backward(float* dinp, const float* dout, int64_t B, int64_t T, int64_t C, cudaStream_t stream);

}  // namespace meshtrain::kernels::cuda
