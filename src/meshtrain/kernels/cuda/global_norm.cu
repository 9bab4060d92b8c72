// Sum of squares in two passes with a fixed shape, so no float atomics and
// the same bits every run:
//   pass 1: kGlobalNormPartials blocks; thread t of the grid takes packs
//           t, t + grid, t + 2 grid, ...; each block sums its threads
//           (block_sum) into partials[block];
//   pass 2: one block sums the partials in the same fixed tree.
// Squares and sums are in double, as optim/clip.cpp's, so the result is
// within rounding of the float output of the CPU's sum.
#include "meshtrain/kernels/cuda/global_norm.hpp"

#include <cmath>

#include "meshtrain/kernels/clip_math.hpp"
#include "meshtrain/kernels/cuda/kernel_util.cuh"

namespace meshtrain::kernels::cuda {
namespace {

using detail::block_sum;
using detail::load_pack;
using detail::Pack;

constexpr int kBlock = 256;
constexpr int kFinalBlock = 1024;
static_assert(kGlobalNormPartials == kFinalBlock, "pass 2 is one thread per partial");

template <int W>
__global__ void __launch_bounds__(kBlock) squares_kernel(double* partials, const float* x, int64_t n) {
  const int64_t packs = n / W;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  double acc = 0;
  for (int64_t p = tid; p < packs; p += stride) {
    const Pack<float, W> v = load_pack<W>(x + p * W);
#pragma unroll
    for (int k = 0; k < W; ++k) acc += double(v.v[k]) * double(v.v[k]);
  }
  for (int64_t i = packs * W + tid; i < n; i += stride) acc += double(x[i]) * double(x[i]);
  const double total = block_sum<kBlock>(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void __launch_bounds__(kFinalBlock) sum_partials_kernel(float* sumsq, const double* partials) {
  const double total = block_sum<kFinalBlock>(partials[threadIdx.x]);
  if (threadIdx.x == 0) *sumsq = float(total);
}

__global__ void clip_coefficient_kernel(float* coef, const float* sumsq, float max_norm) {
  *coef = clip_factor(sqrt(double(*sumsq)), max_norm);
}

struct ScaleBy {
  const float* factor;
  __device__ float operator()(float x) const { return x * *factor; }
};

}  // namespace

void global_norm_squared(float* sumsq, double* partials, const float* x, int64_t n, cudaStream_t stream) {
  // Every partial is written (0 for blocks past the data), so n == 0 gives 0.
  if (n > 0 && detail::aligned(x, sizeof(Pack<float, 4>)))
    squares_kernel<4><<<kGlobalNormPartials, kBlock, 0, stream>>>(partials, x, n);
  else
    squares_kernel<1><<<kGlobalNormPartials, kBlock, 0, stream>>>(partials, x, n < 0 ? 0 : n);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
  sum_partials_kernel<<<1, kFinalBlock, 0, stream>>>(sumsq, partials);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

void clip_coefficient(float* coef, const float* sumsq, float max_norm, cudaStream_t stream) {
  clip_coefficient_kernel<<<1, 1, 0, stream>>>(coef, sumsq, max_norm);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

void scale_by(float* x, const float* factor, int64_t n, cudaStream_t stream) {
  detail::map1(ScaleBy{factor}, x, x, n, stream);
}

}  // namespace meshtrain::kernels::cuda
