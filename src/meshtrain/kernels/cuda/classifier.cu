// Fused softmax + cross-entropy + dlogits, one block per row:
//   pass 1: each thread folds its elements into online softmax statistics
//           (kernels/softmax_math.hpp); the block merges them in a fixed
//           tree (a warp butterfly, then the warps' results by another);
//           thread 0 writes lse, loss, hit;
//   pass 2: each thread rewrites its elements as the gradient.
// Two reads of the row and one write, nothing of size V kept. The barrier
// inside the merge sits between the passes, so in place every read of the
// row is done before the first gradient is written; the target's logit is
// read before it too.
//
// A row of V = 50257 floats starts at any 4-byte boundary: each row is
// walked as a head of up to 3 elements (to the next 16-byte boundary),
// packs of 4, and a tail; dlogits uses the same split when its rows share
// logits' alignment, else everything goes element by element.
#include "meshtrain/kernels/cuda/classifier.hpp"

#include <limits>
#include <string>

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/cuda/kernel_util.cuh"
#include "meshtrain/kernels/softmax_math.hpp"

namespace meshtrain::kernels::cuda {
namespace {

using detail::kWarp;
using detail::load_pack;
using detail::Pack;
using detail::store_pack;

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / kWarp;

__device__ __forceinline__ SoftmaxStats warp_merge(SoftmaxStats s) {
#pragma unroll
  for (int off = kWarp / 2; off > 0; off >>= 1) {
    SoftmaxStats other;
    other.max = __shfl_xor_sync(0xffffffffu, s.max, off);
    other.sum = __shfl_xor_sync(0xffffffffu, s.sum, off);
    other.arg = __shfl_xor_sync(0xffffffffu, s.arg, off);
    s = softmax_stats_merge(s, other);
  }
  return s;
}

// The row's statistics, in every thread.
__device__ __forceinline__ SoftmaxStats block_merge(SoftmaxStats s) {
  __shared__ SoftmaxStats warp_stats[kWarps];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  s = warp_merge(s);
  if (lane == 0) warp_stats[warp] = s;
  __syncthreads();
  return warp_merge(lane < kWarps ? warp_stats[lane] : softmax_stats_empty());
}

// Elements of the row before its first 16-byte boundary (W = 4), or none (W = 1).
template <int W>
__device__ __forceinline__ int64_t head_of(const float* row, int64_t V) {
  if (W == 1) return 0;
  const int64_t head = int64_t((16 - (reinterpret_cast<uintptr_t>(row) & 15)) & 15) / int64_t(sizeof(float));
  return head < V ? head : V;
}

template <int W>
__global__ void __launch_bounds__(kThreads)
    classifier_kernel(float* lse, float* loss, float* hit, float* dlogits, const float* logits,
                      const int32_t* targets, int64_t V, float dloss) {
  const int64_t n = blockIdx.x;
  const float* z = logits + n * V;
  const int32_t target = targets[n];
  const float z_target = threadIdx.x == 0 && target >= 0 ? z[target] : 0.0f;
  const int64_t head = head_of<W>(z, V);
  const int64_t packs = (V - head) / W;
  const int64_t tail = head + packs * W;

  // Pass 1.
  SoftmaxStats st = softmax_stats_empty();
  if (threadIdx.x < head) softmax_stats_add(st, z[threadIdx.x], int32_t(threadIdx.x));
  for (int64_t p = threadIdx.x; p < packs; p += kThreads) {
    const int64_t j = head + p * W;
    const Pack<float, W> v = load_pack<W>(z + j);
#pragma unroll
    for (int k = 0; k < W; ++k) softmax_stats_add(st, v.v[k], int32_t(j + k));
  }
  for (int64_t j = tail + threadIdx.x; j < V; j += kThreads) softmax_stats_add(st, z[j], int32_t(j));
  st = block_merge(st);
  // As the CPU: lse = max + log(sum of exp(z - max)).
  const float row_lse = st.max + logf(st.sum);
  if (threadIdx.x == 0) {
    lse[n] = row_lse;
    loss[n] = target >= 0 ? row_lse - z_target : 0.0f;
    if (hit) hit[n] = target >= 0 && st.arg == target ? 1.0f : 0.0f;
  }
  if (!dlogits) return;

  // Pass 2: softmax_xent_backward's expression, fast_exp(z - lse) * dloss,
  // less dloss at the target.
  float* dz = dlogits + n * V;
  const auto grad = [&](float zj, int64_t j) {
    if (target < 0) return 0.0f;
    float d = fast_exp(zj - row_lse) * dloss;
    if (j == target) d -= dloss;
    return d;
  };
  if (threadIdx.x < head) dz[threadIdx.x] = grad(z[threadIdx.x], threadIdx.x);
  for (int64_t p = threadIdx.x; p < packs; p += kThreads) {
    const int64_t j = head + p * W;
    const Pack<float, W> v = load_pack<W>(z + j);
    Pack<float, W> d;
#pragma unroll
    for (int k = 0; k < W; ++k) d.v[k] = grad(v.v[k], j + k);
    store_pack<W>(dz + j, d);
  }
  for (int64_t j = tail + threadIdx.x; j < V; j += kThreads) dz[j] = grad(z[j], j);
}

}  // namespace

void fused_classifier(float* lse, float* loss, float* hit, float* dlogits, const float* logits,
                      const int32_t* targets, int64_t N, int64_t V, float dloss, cudaStream_t stream) {
  if (N <= 0 || V <= 0) return;
  if (N > std::numeric_limits<int32_t>::max() || V > std::numeric_limits<int32_t>::max())
    throw DeviceError("fused_classifier: " + std::to_string(N) + " rows of " + std::to_string(V) +
                      " logits; rows and the vocabulary must each fit int32");
  // Packs of 4 where dlogits' rows reach 16-byte boundaries where logits' do
  // (always in place); logits must be 4-byte aligned, as any float array.
  const bool packed =
      !dlogits || (reinterpret_cast<uintptr_t>(dlogits) - reinterpret_cast<uintptr_t>(logits)) % 16 == 0;
  if (packed)
    classifier_kernel<4><<<unsigned(N), kThreads, 0, stream>>>(lse, loss, hit, dlogits, logits, targets, V, dloss);
  else
    classifier_kernel<1><<<unsigned(N), kThreads, 0, stream>>>(lse, loss, hit, dlogits, logits, targets, V, dloss);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace meshtrain::kernels::cuda
