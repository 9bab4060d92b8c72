// LAMB (lamb.hpp): pass 1 kSquaresLanes threads per chunk, thread j moving
// the moments of elements j, j + kSquaresLanes, ... and summing their lane
// of squares, added by add_square_lanes; pass 2 a thread per element, grid.x
// one column of blocks per chunk as AdamW's.
#include "meshtrain/kernels/cuda/lamb.hpp"

#include "meshtrain/kernels/cuda/kernel_util.cuh"

namespace meshtrain::kernels::cuda {
namespace {

constexpr int kBlock = 256;
constexpr int kLanes = int(kSquaresLanes);

__global__ void __launch_bounds__(kBlock) lamb_moments_kernel(const LambChunk* chunks, int64_t n_chunks, LambStep s,
                                                              double* sums) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t c = t / kLanes;
  const int j = int(t % kLanes);
  double w_lane = 0.0, u_lane = 0.0;
  if (c < n_chunks) {
    const LambChunk ch = chunks[c];
    const float wd = ch.decays ? s.weight_decay : 0.0f;
    for (int64_t i = j; i < ch.size; i += kLanes) {
      float m = ch.m[i], v = ch.v[i];
      const float w = ch.param[i];
      lamb_moments_element(m, v, ch.grad[i], s);
      ch.m[i] = m;
      ch.v[i] = v;
      const float u = lamb_direction(m, v, w, wd, s);
      w_lane += double(w) * double(w);
      u_lane += double(u) * double(u);
    }
  }
  const double w_sum = detail::add_square_lanes(w_lane), u_sum = detail::add_square_lanes(u_lane);
  if (j == 0 && c < n_chunks) {
    sums[2 * c] = w_sum;
    sums[2 * c + 1] = u_sum;
  }
}

__global__ void lamb_apply_kernel(const LambChunk* chunks, const float* scales, LambStep s) {
  const LambChunk ch = chunks[blockIdx.x];
  const float wd = ch.decays ? s.weight_decay : 0.0f;
  const float scale = scales[ch.view];
  const int64_t stride = int64_t(gridDim.y) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.y) * blockDim.x + threadIdx.x; i < ch.size; i += stride) {
    const float w = ch.param[i];
    ch.param[i] = w - scale * lamb_direction(ch.m[i], ch.v[i], w, wd, s);
  }
}

}  // namespace

void lamb_moments(const LambChunk* chunks, int64_t n_chunks, const LambStep& step, double* sums,
                  cudaStream_t stream) {
  if (n_chunks <= 0) return;
  detail::check_chunk_grid(n_chunks, kLanes, "lamb_moments");
  const int64_t threads = n_chunks * kLanes;
  lamb_moments_kernel<<<unsigned((threads + kBlock - 1) / kBlock), kBlock, 0, stream>>>(chunks, n_chunks, step, sums);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

void lamb_apply(const LambChunk* chunks, int64_t n_chunks, int64_t max_chunk_size, const float* scales,
                const LambStep& step, cudaStream_t stream) {
  if (n_chunks <= 0 || max_chunk_size <= 0) return;
  detail::check_chunk_grid(n_chunks, 1, "lamb_apply");
  const dim3 grid(unsigned(n_chunks), detail::blocks_for(max_chunk_size, kBlock, detail::kMaxGridY));
  lamb_apply_kernel<<<grid, kBlock, 0, stream>>>(chunks, scales, step);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace meshtrain::kernels::cuda
