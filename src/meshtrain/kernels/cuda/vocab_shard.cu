#include "meshtrain/kernels/cuda/vocab_shard.hpp"

#include <limits>
#include <string>

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/cuda/cuda_check.hpp"
#include "meshtrain/kernels/cuda/kernel_util.cuh"
#include "meshtrain/kernels/fast_math.hpp"
#include "meshtrain/kernels/vocab_shard_math.hpp"

namespace meshtrain::kernels::cuda {
namespace {

using detail::kWarp;

constexpr int kThreads = 1024;

struct MaxArg {
  float max;
  int32_t arg;
};

// The larger value; on a tie the lower column (the CPU's first maximum).
__device__ __forceinline__ MaxArg better(MaxArg a, MaxArg b) {
  return b.max > a.max || (b.max == a.max && b.arg < a.arg) ? b : a;
}

__device__ __forceinline__ MaxArg warp_max_arg(MaxArg m) {
#pragma unroll
  for (int off = kWarp / 2; off > 0; off >>= 1) {
    const MaxArg other{__shfl_xor_sync(0xffffffffu, m.max, off), __shfl_xor_sync(0xffffffffu, m.arg, off)};
    m = better(m, other);
  }
  return m;
}

__global__ void __launch_bounds__(kThreads) row_max_argmax_kernel(float* mx, int32_t* arg, const float* logits,
                                                                  int64_t V) {
  __shared__ MaxArg warps[kThreads / kWarp];
  const int64_t n = blockIdx.x;
  const float* z = logits + n * V;
  MaxArg m{-std::numeric_limits<float>::infinity(), std::numeric_limits<int32_t>::max()};
  for (int64_t j = threadIdx.x; j < V; j += kThreads) m = better(m, MaxArg{z[j], int32_t(j)});
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  m = warp_max_arg(m);
  if (lane == 0) warps[warp] = m;
  __syncthreads();
  if (warp != 0) return;
  m = warp_max_arg(lane < kThreads / kWarp ? warps[lane]
                                           : MaxArg{-std::numeric_limits<float>::infinity(),
                                                    std::numeric_limits<int32_t>::max()});
  if (lane == 0) {
    mx[n] = m.max;
    arg[n] = m.arg;
  }
}

__global__ void __launch_bounds__(kThreads)
    shard_sums_kernel(float* sumexp, float* target_logit, const float* logits, const float* mx,
                      const int32_t* targets, int64_t V, int64_t v0) {
  const int64_t n = blockIdx.x;
  const float* z = logits + n * V;
  const float m = mx[n];
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < V; j += kThreads) sum += fast_exp(z[j] - m);
  sum = detail::block_sum<kThreads>(sum);
  if (threadIdx.x == 0) {
    sumexp[n] = sum;
    const int64_t t = int64_t(targets[n]) - v0;
    target_logit[n] = t >= 0 && t < V ? z[t] : 0.0f;
  }
}

__global__ void shard_backward_kernel(float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                                      int64_t N, int64_t V, float dloss, int64_t v0) {
  const int64_t total = N * V;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i / V, j = i - n * V;
    float d = fast_exp(logits[i] - lse[n]) * dloss;  // the CPU's expression
    if (int64_t(targets[n]) - v0 == j) d -= dloss;
    dlogits[i] = d;
  }
}

void check_rows(const char* what, int64_t N, int64_t V) {
  if (N > std::numeric_limits<int32_t>::max() || V > std::numeric_limits<int32_t>::max())
    throw DeviceError(std::string(what) + ": " + std::to_string(N) + " rows of " + std::to_string(V) +
                      " logits; rows and the shard must each fit int32");
}

__global__ void argmax_candidates_kernel(int32_t* arg, const float* local_max, const float* mx, int64_t N, int64_t v0,
                                         int64_t V) {
  for (int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; n < N; n += int64_t(gridDim.x) * blockDim.x)
    arg[n] = shard_argmax_candidate(local_max[n], mx[n], arg[n], v0, V);
}

__global__ void loss_rows_kernel(float* lse, float* loss, float* hit, const float* mx, const float* sumexp,
                                 const float* target_logit, const int32_t* arg, const int32_t* targets, int64_t N) {
  for (int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; n < N; n += int64_t(gridDim.x) * blockDim.x) {
    const ShardLossRow row = shard_loss_row(mx[n], sumexp[n], target_logit[n], arg[n], targets[n]);
    lse[n] = row.lse;
    loss[n] = row.loss;
    hit[n] = row.hit;
  }
}

}  // namespace

void row_max_argmax(float* mx, int32_t* arg, const float* logits, int64_t N, int64_t V, cudaStream_t stream) {
  if (N <= 0 || V <= 0) return;
  check_rows("row_max_argmax", N, V);
  row_max_argmax_kernel<<<unsigned(N), kThreads, 0, stream>>>(mx, arg, logits, V);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

void softmax_xent_shard_sums(float* sumexp, float* target_logit, const float* logits, const float* mx,
                             const int32_t* targets, int64_t N, int64_t V, int64_t v0, cudaStream_t stream) {
  if (N <= 0 || V <= 0) return;
  check_rows("softmax_xent_shard_sums", N, V);
  shard_sums_kernel<<<unsigned(N), kThreads, 0, stream>>>(sumexp, target_logit, logits, mx, targets, V, v0);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

void softmax_xent_shard_backward(float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                                 int64_t N, int64_t V, float dloss, int64_t v0, cudaStream_t stream) {
  if (N <= 0 || V <= 0) return;
  constexpr int kBlock = 256;
  shard_backward_kernel<<<detail::blocks_for(N * V, kBlock), kBlock, 0, stream>>>(dlogits, logits, lse, targets, N,
                                                                                  V, dloss, v0);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

void shard_argmax_candidates(int32_t* arg, const float* local_max, const float* mx, int64_t N, int64_t v0, int64_t V,
                             cudaStream_t stream) {
  if (N <= 0) return;
  constexpr int kBlock = 256;
  argmax_candidates_kernel<<<detail::blocks_for(N, kBlock), kBlock, 0, stream>>>(arg, local_max, mx, N, v0, V);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

void shard_loss_rows(float* lse, float* loss, float* hit, const float* mx, const float* sumexp,
                     const float* target_logit, const int32_t* arg, const int32_t* targets, int64_t N,
                     cudaStream_t stream) {
  if (N <= 0) return;
  constexpr int kBlock = 256;
  loss_rows_kernel<<<detail::blocks_for(N, kBlock), kBlock, 0, stream>>>(lse, loss, hit, mx, sumexp, target_logit,
                                                                         arg, targets, N);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace meshtrain::kernels::cuda
