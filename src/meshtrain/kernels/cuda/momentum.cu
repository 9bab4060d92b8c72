// SGD and LARS (momentum.hpp): the update a thread per element, grid.x one
// column of blocks per chunk as AdamW's; the sums of squares kSquaresLanes
// threads per chunk, added by add_square_lanes.
#include "meshtrain/kernels/cuda/momentum.hpp"

#include "meshtrain/kernels/cuda/kernel_util.cuh"

namespace meshtrain::kernels::cuda {
namespace {

constexpr int kBlock = 256;
constexpr int kLanes = int(kSquaresLanes);

__global__ void __launch_bounds__(kBlock) momentum_squares_kernel(const MomentumChunk* chunks, int64_t n_chunks,
                                                                  double* sums) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t c = t / kLanes;
  const int j = int(t % kLanes);
  double w_lane = 0.0, g_lane = 0.0;
  if (c < n_chunks && chunks[c].decays) {
    const MomentumChunk ch = chunks[c];
    for (int64_t i = j; i < ch.size; i += kLanes) {
      w_lane += double(ch.param[i]) * double(ch.param[i]);
      g_lane += double(ch.grad[i]) * double(ch.grad[i]);
    }
  }
  const double w_sum = detail::add_square_lanes(w_lane), g_sum = detail::add_square_lanes(g_lane);
  if (j == 0 && c < n_chunks) {
    sums[2 * c] = w_sum;
    sums[2 * c + 1] = g_sum;
  }
}

// grid.x: one column of blocks per chunk; grid.y: the blocks striding over it.
__global__ void momentum_update_kernel(const MomentumChunk* chunks, const float* trusts, MomentumStep s) {
  const MomentumChunk ch = chunks[blockIdx.x];
  const float wd = ch.decays ? s.weight_decay : 0.0f;
  const float trust = trusts ? trusts[ch.view] : 1.0f;
  const int64_t stride = int64_t(gridDim.y) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.y) * blockDim.x + threadIdx.x; i < ch.size; i += stride) {
    float w = ch.param[i];
    if (ch.momentum) {
      float buf = ch.momentum[i];
      momentum_element(w, ch.grad[i], &buf, wd, trust, s);
      ch.momentum[i] = buf;
    } else {
      momentum_element(w, ch.grad[i], nullptr, wd, trust, s);
    }
    ch.param[i] = w;
  }
}

}  // namespace

void momentum_squares(const MomentumChunk* chunks, int64_t n_chunks, double* sums, cudaStream_t stream) {
  if (n_chunks <= 0) return;
  detail::check_chunk_grid(n_chunks, kLanes, "momentum_squares");
  const int64_t threads = n_chunks * kLanes;
  momentum_squares_kernel<<<unsigned((threads + kBlock - 1) / kBlock), kBlock, 0, stream>>>(chunks, n_chunks, sums);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

void momentum_update(const MomentumChunk* chunks, int64_t n_chunks, int64_t max_chunk_size, const float* trusts,
                     const MomentumStep& step, cudaStream_t stream) {
  if (n_chunks <= 0 || max_chunk_size <= 0) return;
  detail::check_chunk_grid(n_chunks, 1, "momentum_update");
  const dim3 grid(unsigned(n_chunks), detail::blocks_for(max_chunk_size, kBlock, detail::kMaxGridY));
  momentum_update_kernel<<<grid, kBlock, 0, stream>>>(chunks, trusts, step);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace meshtrain::kernels::cuda
