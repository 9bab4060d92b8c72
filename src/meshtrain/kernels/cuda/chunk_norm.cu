// Chunked sums of squares (chunk_norm.hpp): 8 threads per chunk, thread j
// summing the chunk's elements j, j + 8, j + 16, ... in order (sum_squares's
// lane j), then the chunk's first thread adding the 8 lane sums in lane
// order, gathered by shuffles within the 8.
#include "meshtrain/kernels/cuda/chunk_norm.hpp"

#include "meshtrain/kernels/cuda/kernel_util.cuh"
#include "meshtrain/kernels/norm.hpp"

namespace meshtrain::kernels::cuda {
namespace {

constexpr int kBlock = 256;
constexpr int kLanes = int(kSquaresLanes);  // sum_squares's; divides a warp

__global__ void __launch_bounds__(kBlock)
    chunk_squares_kernel(double* partials, const float* base, uint64_t begin, uint64_t end, uint64_t first_block,
                         int64_t chunks) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t c = t / kLanes;
  const int j = int(t % kLanes);
  double lane = 0.0;
  if (c < chunks) {
    const uint64_t block_lo = (first_block + uint64_t(c)) * kNormChunkElems;
    const uint64_t lo = begin > block_lo ? begin : block_lo;
    const uint64_t hi = end < block_lo + kNormChunkElems ? end : block_lo + kNormChunkElems;
    const float* x = base + lo;
    const int64_t n = int64_t(hi - lo);
    for (int64_t r = j; r < n; r += kLanes) lane += double(x[r]) * double(x[r]);
  }
  // Every thread of the warp takes part in the shuffles (whole warps per block).
  const double s = detail::add_square_lanes(lane);
  if (j == 0 && c < chunks) partials[c] = s;
}

struct Scale {
  float factor;
  __device__ float operator()(float x) const { return x * factor; }
};

}  // namespace

int64_t squared_norm_chunks(size_t begin, size_t end) {
  if (begin >= end) return 0;
  return int64_t((end - 1) / kNormChunkElems - begin / kNormChunkElems + 1);
}

void chunk_sum_squares(double* partials, const float* base, size_t begin, size_t end, cudaStream_t stream) {
  const int64_t chunks = squared_norm_chunks(begin, end);
  if (chunks == 0) return;
  const int64_t threads = chunks * kLanes;
  chunk_squares_kernel<<<unsigned((threads + kBlock - 1) / kBlock), kBlock, 0, stream>>>(
      partials, base, begin, end, begin / kNormChunkElems, chunks);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

void scale(float* x, int64_t n, float factor, cudaStream_t stream) { detail::map1(Scale{factor}, x, x, n, stream); }

}  // namespace meshtrain::kernels::cuda
