#pragma once
// Device-side pieces shared by the .cu files of kernels/cuda/ (never by a
// .hpp: launchers' headers compile with g++ alone):
//   Pack<T, W>      W consecutive elements moved by one load or store
//                   (4 floats = 128 bits, 4 bf16 = 64 bits) where aligned;
//   warp_sum        a fixed-order butterfly sum, block_sum over a block;
//   add_square_lanes  the lanes of norm.hpp's sums of squares, in lane order;
//   map1 / map2     element-wise kernels (GELU, conversions, scaling);
//   blocks_for      grid sizes that do not depend on the device;
//   check_chunk_grid  whether an optimizer's chunks fit one launch.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/core/hd.hpp"
#include "meshtrain/kernels/cuda/cuda_check.hpp"
#include "meshtrain/kernels/norm.hpp"

namespace meshtrain::kernels::cuda::detail {

inline constexpr int kWarp = 32;
// Grid-stride kernels stop growing the grid here: enough blocks to fill
// any H100/H200 many times over, and a fixed number, so a launch's shape
// depends on the sizes only.
inline constexpr int64_t kMaxBlocks = 1 << 16;
// The largest gridDim.y (and z) a launch may have.
inline constexpr int64_t kMaxGridY = 65535;

inline unsigned blocks_for(int64_t work_items, int block, int64_t cap = kMaxBlocks) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((work_items + block - 1) / block, cap)));
}

// Throws DeviceError unless n_chunks chunks of threads_per_chunk threads
// each fit one launch's grid.x (an optimizer's chunk tables).
inline void check_chunk_grid(int64_t n_chunks, int threads_per_chunk, const char* who) {
  if (n_chunks > int64_t(std::numeric_limits<int32_t>::max()) / threads_per_chunk)
    throw DeviceError(std::string(who) + ": " + std::to_string(n_chunks) +
                      " chunks, more than one launch's grid holds");
}

inline bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <class T, int W>
struct alignas(sizeof(T) * W) Pack {
  T v[W];
};

// The raw type of one load or store of `bytes` bytes.
template <size_t bytes>
struct RawWord;
template <>
struct RawWord<16> { using type = int4; };
template <>
struct RawWord<8> { using type = int2; };
template <>
struct RawWord<4> { using type = int; };
template <>
struct RawWord<2> { using type = unsigned short; };

// p must be aligned to sizeof(Pack<T, W>) (the launchers check and fall
// back to W = 1). One vector instruction: going through int4 / int2 makes
// nvcc emit ld.global.v4 / v2 instead of W scalar loads.
template <int W, class T>
__device__ __forceinline__ Pack<T, W> load_pack(const T* p) {
  using Raw = typename RawWord<sizeof(Pack<T, W>)>::type;
  // Loaded into a register first: a memcpy straight from the global
  // address would be lowered to byte loads.
  const Raw raw = *reinterpret_cast<const Raw*>(p);
  return bit_cast_hd<Pack<T, W>>(raw);
}

template <int W, class T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, W>& x) {
  using Raw = typename RawWord<sizeof(Pack<T, W>)>::type;
  *reinterpret_cast<Raw*>(p) = bit_cast_hd<Raw>(x);
}

// A float result stored as the output's element type.
__device__ __forceinline__ void set_out(float& o, float v) { o = v; }
__device__ __forceinline__ void set_out(Bf16& o, float v) { o = ::meshtrain::to_bf16(v); }

// Sum over the 32 lanes of a warp, returned to every lane. The butterfly
// adds the same two values at each level on both partners (in either order:
// addition commutes bit for bit), so all lanes hold the same bits, and the
// association is fixed, so every run does too.
template <class T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int off = kWarp / 2; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// The lanes of norm.hpp's sums of squares, one per thread of a group of
// kSquaresLanes consecutive threads (thread j holds lane j), added in lane
// order: the CPU's add_lanes. Every thread gets the sum; every thread of
// the warp must call it (the groups divide a warp).
__device__ __forceinline__ double add_square_lanes(double lane) {
  constexpr int kLanes = int(kSquaresLanes);
  static_assert(kWarp % kLanes == 0, "the lanes' groups divide a warp");
  double s = 0.0;
#pragma unroll
  for (int k = 0; k < kLanes; ++k) s += __shfl_sync(0xffffffffu, lane, k, kLanes);
  return s;
}

// Sum over a block of kThreads threads (blockDim.x == kThreads), returned
// to every thread. Fixed order: each warp's butterfly, then the warps' sums
// in warp order by a second butterfly (every warp computes it: same bits).
template <int kThreads, class T>
__device__ __forceinline__ T block_sum(T v) {
  static_assert(kThreads % kWarp == 0 && kThreads <= kWarp * kWarp, "block_sum: 32 to 1024 threads, whole warps");
  constexpr int kWarps = kThreads / kWarp;
  __shared__ T warp_sums[kWarps];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  v = warp_sum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  const T total = warp_sum(lane < kWarps ? warp_sums[lane] : T(0));
  __syncthreads();  // warp_sums is free again for the next call
  return total;
}

// Element-wise kernels: out[i] = f(a[i]) or f(a[i], b[i]) for i < n, in
// packs of W, then the tail (fewer than W elements). Out may alias an
// input: each element is read before it is written, by the same thread.
// Every element is computed by the same f whatever W is, so the choice of
// W never changes a bit.
template <int W, class F, class Out, class A>
__global__ void map1_kernel(F f, Out* out, const A* a, int64_t n) {
  const int64_t packs = n / W;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t p = tid; p < packs; p += stride) {
    const Pack<A, W> x = load_pack<W>(a + p * W);
    Pack<Out, W> y;
#pragma unroll
    for (int k = 0; k < W; ++k) y.v[k] = f(x.v[k]);
    store_pack<W>(out + p * W, y);
  }
  for (int64_t i = packs * W + tid; i < n; i += stride) out[i] = f(a[i]);
}

template <int W, class F, class Out, class A, class B>
__global__ void map2_kernel(F f, Out* out, const A* a, const B* b, int64_t n) {
  const int64_t packs = n / W;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t p = tid; p < packs; p += stride) {
    const Pack<A, W> x = load_pack<W>(a + p * W);
    const Pack<B, W> z = load_pack<W>(b + p * W);
    Pack<Out, W> y;
#pragma unroll
    for (int k = 0; k < W; ++k) y.v[k] = f(x.v[k], z.v[k]);
    store_pack<W>(out + p * W, y);
  }
  for (int64_t i = packs * W + tid; i < n; i += stride) out[i] = f(a[i], b[i]);
}

inline constexpr int kMapBlock = 256;
inline constexpr int kMapPack = 4;

template <class F, class Out, class A>
void map1(F f, Out* out, const A* a, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  if (aligned(out, sizeof(Pack<Out, kMapPack>)) && aligned(a, sizeof(Pack<A, kMapPack>))) {
    map1_kernel<kMapPack><<<blocks_for((n + kMapPack - 1) / kMapPack, kMapBlock), kMapBlock, 0, stream>>>(f, out, a, n);
  } else {
    map1_kernel<1><<<blocks_for(n, kMapBlock), kMapBlock, 0, stream>>>(f, out, a, n);
  }
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

template <class F, class Out, class A, class B>
void map2(F f, Out* out, const A* a, const B* b, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  if (aligned(out, sizeof(Pack<Out, kMapPack>)) && aligned(a, sizeof(Pack<A, kMapPack>)) &&
      aligned(b, sizeof(Pack<B, kMapPack>))) {
    map2_kernel<kMapPack>
        <<<blocks_for((n + kMapPack - 1) / kMapPack, kMapBlock), kMapBlock, 0, stream>>>(f, out, a, b, n);
  } else {
    map2_kernel<1><<<blocks_for(n, kMapBlock), kMapBlock, 0, stream>>>(f, out, a, b, n);
  }
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace meshtrain::kernels::cuda::detail
