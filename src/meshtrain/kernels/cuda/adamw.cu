// AdamW: a thread per element, adamw_element around it. The update is
// element-wise, so there is no order to fix: each element's bits depend on
// its own inputs only.
#include "meshtrain/kernels/cuda/adamw.hpp"

#include "meshtrain/kernels/cuda/kernel_util.cuh"

namespace meshtrain::kernels::cuda {
namespace {

constexpr int kBlock = 256;

// Elements i = first, first + stride, ... < n of one range.
__device__ __forceinline__ void update_range(float* __restrict__ w, const float* __restrict__ g,
                                             float* __restrict__ m, float* __restrict__ v, int64_t n,
                                             int64_t first, int64_t stride, float decay, const AdamWStep& s,
                                             const float* grad_scale) {
  // Read once per thread; 1 when absent (x * 1 would keep the bits too).
  const float scale = grad_scale ? *grad_scale : 1.0f;
  for (int64_t i = first; i < n; i += stride) {
    float wi = w[i], mi = m[i], vi = v[i];
    const float gi = grad_scale ? g[i] * scale : g[i];
    adamw_element(wi, gi, mi, vi, decay, s);
    w[i] = wi;
    m[i] = mi;
    v[i] = vi;
  }
}

// grid.x: one column of blocks per chunk; grid.y: the blocks striding over it.
__global__ void adamw_chunks_kernel(const AdamWChunk* chunks, AdamWStep s, const float* grad_scale) {
  const AdamWChunk ch = chunks[blockIdx.x];
  update_range(ch.param, ch.grad, ch.m, ch.v, ch.size, int64_t(blockIdx.y) * blockDim.x + threadIdx.x,
               int64_t(gridDim.y) * blockDim.x, ch.weight_decay ? s.decay_factor : 1.0f, s, grad_scale);
}

__global__ void adamw_flat_kernel(float* w, const float* g, float* m, float* v, int64_t n, float decay, AdamWStep s,
                                  const float* grad_scale) {
  update_range(w, g, m, v, n, int64_t(blockIdx.x) * blockDim.x + threadIdx.x, int64_t(gridDim.x) * blockDim.x,
               decay, s, grad_scale);
}

}  // namespace

void adamw_update(const AdamWChunk* chunks, int64_t n_chunks, int64_t max_chunk_size, const AdamWStep& step,
                  const float* grad_scale, cudaStream_t stream) {
  if (n_chunks <= 0 || max_chunk_size <= 0) return;
  detail::check_chunk_grid(n_chunks, 1, "adamw_update");
  // gridDim.y is at most 65535; larger chunks are strided over by those blocks.
  const dim3 grid(unsigned(n_chunks), detail::blocks_for(max_chunk_size, kBlock, 65535));
  adamw_chunks_kernel<<<grid, kBlock, 0, stream>>>(chunks, step, grad_scale);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, bool weight_decay,
                  const AdamWStep& step, const float* grad_scale, cudaStream_t stream) {
  if (n <= 0) return;
  adamw_flat_kernel<<<detail::blocks_for(n, kBlock), kBlock, 0, stream>>>(
      param, grad, m, v, n, weight_decay ? step.decay_factor : 1.0f, step, grad_scale);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace meshtrain::kernels::cuda
