// Flash attention (FlashAttention-2's loop order) on the fused qkv.
//
// Terms. For one head (b, h): Q, K, V (T, hs) are strided views into qkv
// (B, T, 3C), row stride 3C; O, dO (T, hs) views into out, dout (B, T, C),
// row stride C. A tile is kTile consecutive rows of one of them: a query
// tile (rows of Q, O, dO) or a key tile (rows of K, V). A block of kThreads
// threads works on one (b, h) and one tile, held in shared memory as fp32
// (bf16 is widened as it is loaded; rows past T are zeros). Inside a block,
// the kGroup = 4 threads of a row group share tile row r = threadIdx.x / 4
// (a group lies inside one warp); thread sub = threadIdx.x % 4 of the group
// takes keys c = sub + 4k of a (kTile x kTile) score tile and head columns
// sub + 4k of an output row. A query row i sees key j when j < T and, if
// causal, j <= i; a causal query tile [i0, i0 + kTile) meets key tiles
// [0, i0 + kTile) only, and a key tile j0 query tiles [j0, T) only.
//
// Forward: a block per (b, h, query tile); it loops over the key tiles with
// the online-softmax recurrence per query row i. With s_j = scale q_i . k_j,
// running max m (from -inf), running sum l (from 0) and the unnormalized
// output o (from 0), a key tile with scores s_j does
//     m' = max(m, max_j s_j),  a = exp(m - m'),  p_j = exp(s_j - m'),
//     l  = a l + sum_j p_j,    o = a o + sum_j p_j v_j,  m = m'
// so after the last tile out_i = o / l and lse_i = m + log(l). Key 0 is
// seen by every row (padding rows past T included), so m is finite after
// the first tile and a = exp(-inf) = 0 there.
//
// Backward, deterministic (every output element has one writer and a fixed
// summation order). With P = exp(S - lse) recomputed from Q, K and lse,
// dP = dO V^T, delta_i = dO_i . O_i (= sum_j P_ij dP_ij), the score
// gradient is dS = P * (dP - delta) * scale (the CPU's expression), and
//     dV = P^T dO,  dK = dS^T Q,  dQ = dS K.
//   delta_kernel: a warp per (b, t, h) row, delta (B, NH, T);
//   backward_kv_kernel: a block per (b, h, key tile); loops over the query
//     tiles that see it, accumulating dK, dV rows in registers;
//   backward_q_kernel: a block per (b, h, query tile); loops over key tiles,
//     accumulating dQ rows in registers.
// P and dS are recomputed by both (the price of no atomics); both compute
// them with the same code, so with the same bits.
#include "meshtrain/kernels/cuda/attention.hpp"

#include <cmath>
#include <string>

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/cuda/kernel_util.cuh"

namespace meshtrain::kernels::cuda {
namespace {

using detail::kWarp;

constexpr int kTile = 32;                       // rows of a query tile = keys of a key tile
constexpr int kThreads = 128;                   // per block of the tile kernels
constexpr int kGroup = kThreads / kTile;        // threads per tile row
constexpr int kKeysPerThread = kTile / kGroup;  // score entries per thread per tile row
constexpr int kScoreLd = kTile + 1;             // row stride of a score tile in shared memory (+1: no bank conflicts)
static_assert(kWarp % kGroup == 0, "a row group must lie inside one warp (its shuffles)");
static_assert(kTile % kGroup == 0, "");

constexpr int64_t kMaxHeadSize = 128;
constexpr int64_t kMaxTiles = 65535;  // grid.y

// One head's geometry, passed by value to every kernel.
struct Dims {
  int64_t T, C, NH;
  int hs;       // head size
  int ld;       // row stride of a (kTile, hs) tile in shared memory: hs + 1 (odd: rows fall in distinct banks)
  float scale;  // 1 / sqrt(hs), as the CPU computes it
  bool causal;
};

__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ float widen(Bf16 x) { return ::meshtrain::to_float(x); }

// Rows [t0, t0 + kTile) of one head's (T, hs) view src (row stride ld_src)
// into dst (kTile, d.ld) fp32; rows past T as zeros. Every thread of the
// block takes part; the caller synchronizes.
template <class In>
__device__ __forceinline__ void load_tile(float* dst, const In* src, int64_t ld_src, int64_t t0, const Dims& d) {
  for (int idx = threadIdx.x; idx < kTile * d.hs; idx += kThreads) {
    const int r = idx / d.hs, x = idx % d.hs;
    const int64_t t = t0 + r;
    dst[r * d.ld + x] = t < d.T ? widen(src[t * ld_src + x]) : 0.0f;
  }
}

// s[k] = a . keys[c] over the head's columns, c = sub + kGroup * k: one row
// of a (query tile) against this thread's keys of a key tile, each dot
// summed in column order.
__device__ __forceinline__ void row_dots(float (&s)[kKeysPerThread], const float* a, const float* keys, int sub,
                                         const Dims& d) {
#pragma unroll
  for (int k = 0; k < kKeysPerThread; ++k) s[k] = 0.0f;
  for (int x = 0; x < d.hs; ++x) {
    const float ax = a[x];
#pragma unroll
    for (int k = 0; k < kKeysPerThread; ++k) s[k] += ax * keys[(sub + kGroup * k) * d.ld + x];
  }
}

// Over the kGroup threads of a row group, every one getting the same bits
// (the butterfly adds the same pair on both partners).
__device__ __forceinline__ float group_max(float v) {
#pragma unroll
  for (int off = 1; off < kGroup; off <<= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (int off = 1; off < kGroup; off <<= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Whether key j may be attended from query row i (i past T included: the forward's padding rows).
__device__ __forceinline__ bool key_visible(int64_t i, int64_t j, const Dims& d) {
  return j < d.T && (!d.causal || j <= i);
}

// ---- forward ----

// Dynamic shared memory: Qs, Ks, Vs (kTile, ld) and Ps (kTile, kScoreLd).
size_t forward_smem_bytes(const Dims& d) {
  return sizeof(float) * (3 * size_t(kTile) * d.ld + size_t(kTile) * kScoreLd);
}

// grid (B * NH, query tiles), the last query tile (most keys when causal) first.
template <int kMaxHS, class In, class Out>
__global__ void __launch_bounds__(kThreads) forward_kernel(Out* out, float* lse, const In* qkv, Dims d) {
  constexpr int kCols = kMaxHS / kGroup;  // output columns per thread, at most
  extern __shared__ float smem[];
  float* Qs = smem;               // (kTile, ld)
  float* Ks = Qs + kTile * d.ld;  // (kTile, ld)
  float* Vs = Ks + kTile * d.ld;  // (kTile, ld)
  float* Ps = Vs + kTile * d.ld;  // (kTile, kScoreLd)

  const int64_t bh = blockIdx.x, b = bh / d.NH, h = bh % d.NH;
  const int64_t q0 = (int64_t(gridDim.y) - 1 - blockIdx.y) * kTile;
  const int r = threadIdx.x / kGroup, sub = threadIdx.x % kGroup;
  const int64_t i = q0 + r;  // this thread's query row
  const int ncols = d.hs / kGroup;
  const In* q = qkv + b * d.T * 3 * d.C + h * d.hs;  // (T, hs), row stride 3C
  const In* k = q + d.C;
  const In* v = q + 2 * d.C;

  load_tile(Qs, q, 3 * d.C, q0, d);
  float o[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) o[c] = 0.0f;
  float m = -INFINITY, l = 0.0f;

  const int64_t key_end = d.causal && q0 + kTile < d.T ? q0 + kTile : d.T;
  for (int64_t j0 = 0; j0 < key_end; j0 += kTile) {
    __syncthreads();  // the previous key tile's Ks, Vs, Ps are read
    load_tile(Ks, k, 3 * d.C, j0, d);
    load_tile(Vs, v, 3 * d.C, j0, d);
    __syncthreads();  // (and Qs, on the first tile)

    float s[kKeysPerThread];
    row_dots(s, Qs + r * d.ld, Ks, sub, d);
    bool seen[kKeysPerThread];
    float tile_max = -INFINITY;
#pragma unroll
    for (int kk = 0; kk < kKeysPerThread; ++kk) {
      seen[kk] = key_visible(i, j0 + sub + kGroup * kk, d);
      s[kk] = seen[kk] ? s[kk] * d.scale : -INFINITY;
      tile_max = fmaxf(tile_max, s[kk]);
    }
    const float m_new = fmaxf(m, group_max(tile_max));
    const float a = expf(m - m_new);
    float sum = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kKeysPerThread; ++kk) {
      const float p = seen[kk] ? expf(s[kk] - m_new) : 0.0f;
      Ps[r * kScoreLd + sub + kGroup * kk] = p;
      sum += p;
    }
    l = a * l + group_sum(sum);
    m = m_new;
    __syncthreads();  // Ps row r complete

    // o = a o + sum_j p_j v_j over this thread's columns sub + kGroup * c.
#pragma unroll
    for (int c = 0; c < kCols; ++c) o[c] *= a;
    for (int jj = 0; jj < kTile; ++jj) {
      const float p = Ps[r * kScoreLd + jj];
      const float* vrow = Vs + jj * d.ld + sub;
#pragma unroll
      for (int c = 0; c < kCols; ++c)
        if (c < ncols) o[c] += p * vrow[kGroup * c];
    }
  }

  if (i < d.T) {
    Out* y = out + (b * d.T + i) * d.C + h * d.hs + sub;  // row i of the head, row stride C
#pragma unroll
    for (int c = 0; c < kCols; ++c)
      if (c < ncols) detail::set_out(y[kGroup * c], o[c] / l);
    if (sub == 0) lse[bh * d.T + i] = m + logf(l);
  }
}

// ---- backward ----

constexpr int kDeltaWarps = 8;

// delta[b, h, t] = dout_t . out_t over head h's columns: a warp per row
// n = (b * T + t) * NH + h of the (B * T * NH, hs) views.
template <class In, class O>
__global__ void __launch_bounds__(kDeltaWarps* kWarp)
    delta_kernel(float* delta, const In* dout, const O* out, Dims d, int64_t rows) {
  const int64_t n = int64_t(blockIdx.x) * kDeltaWarps + threadIdx.x / kWarp;
  if (n >= rows) return;  // a whole warp
  const int lane = threadIdx.x % kWarp;
  float s = 0.0f;
  for (int x = lane; x < d.hs; x += kWarp) s += widen(dout[n * d.hs + x]) * widen(out[n * d.hs + x]);
  s = detail::warp_sum(s);
  const int64_t h = n % d.NH, bt = n / d.NH, b = bt / d.T, t = bt % d.T;
  if (lane == 0) delta[(b * d.NH + h) * d.T + t] = s;
}

// This thread's entries of the score tile (query tile i0, key tile j0):
// row r (query i = i0 + r, its lse_i and delta_i), keys c = sub + kGroup*k
// (key j = j0 + c). dSs[r, c] = ds and, when Ps is given, Ps[r, c] = p, with
//   p = exp(scale q_i . k_j - lse_i),  ds = p (dO_i . v_j - delta_i) scale,
// both 0 where row i (or key j) is past T or j is masked.
__device__ __forceinline__ void score_grads(float* Ps, float* dSs, const float* Qs, const float* dOs, const float* Ks,
                                            const float* Vs, float lse_i, float delta_i, int64_t i0, int64_t j0,
                                            int r, int sub, const Dims& d) {
  float s[kKeysPerThread], dp[kKeysPerThread];
  row_dots(s, Qs + r * d.ld, Ks, sub, d);
  row_dots(dp, dOs + r * d.ld, Vs, sub, d);
  const int64_t i = i0 + r;
#pragma unroll
  for (int kk = 0; kk < kKeysPerThread; ++kk) {
    const int c = sub + kGroup * kk;
    const bool seen = i < d.T && key_visible(i, j0 + c, d);
    const float p = seen ? expf(s[kk] * d.scale - lse_i) : 0.0f;
    const float ds = seen ? p * (dp[kk] - delta_i) * d.scale : 0.0f;
    if (Ps) Ps[r * kScoreLd + c] = p;
    dSs[r * kScoreLd + c] = ds;
  }
}

// Dynamic shared memory of backward_kv_kernel: Ks, Vs, Qs, dOs (kTile, ld),
// Ps, dSs (kTile, kScoreLd), lse_s, delta_s (kTile).
size_t backward_kv_smem_bytes(const Dims& d) {
  return sizeof(float) * (4 * size_t(kTile) * d.ld + 2 * size_t(kTile) * kScoreLd + 2 * size_t(kTile));
}

// grid (B * NH, key tiles), the first key tile (most queries when causal)
// first. Writes the dk, dv rows of its key tile.
template <int kMaxHS, class In>
__global__ void __launch_bounds__(kThreads) backward_kv_kernel(float* dqkv, const In* dout, const float* lse,
                                                               const float* delta, const In* qkv, Dims d) {
  constexpr int kCols = kMaxHS / kGroup;
  extern __shared__ float smem[];
  float* Ks = smem;                     // (kTile, ld)
  float* Vs = Ks + kTile * d.ld;        // (kTile, ld)
  float* Qs = Vs + kTile * d.ld;        // (kTile, ld)
  float* dOs = Qs + kTile * d.ld;       // (kTile, ld)
  float* Ps = dOs + kTile * d.ld;       // (kTile, kScoreLd)
  float* dSs = Ps + kTile * kScoreLd;   // (kTile, kScoreLd)
  float* lse_s = dSs + kTile * kScoreLd;  // (kTile)
  float* delta_s = lse_s + kTile;         // (kTile)

  const int64_t bh = blockIdx.x, b = bh / d.NH, h = bh % d.NH;
  const int64_t j0 = int64_t(blockIdx.y) * kTile;
  const int r = threadIdx.x / kGroup, sub = threadIdx.x % kGroup;
  const int ncols = d.hs / kGroup;
  const In* q = qkv + b * d.T * 3 * d.C + h * d.hs;  // (T, hs), row stride 3C
  const In* k = q + d.C;
  const In* v = q + 2 * d.C;
  const In* dy = dout + b * d.T * d.C + h * d.hs;    // (T, hs), row stride C
  const float* lse_h = lse + bh * d.T;               // (T)
  const float* delta_h = delta + bh * d.T;           // (T)

  load_tile(Ks, k, 3 * d.C, j0, d);
  load_tile(Vs, v, 3 * d.C, j0, d);
  float dk[kCols], dv[kCols];  // key row j0 + r, columns sub + kGroup * c
#pragma unroll
  for (int c = 0; c < kCols; ++c) dk[c] = dv[c] = 0.0f;

  for (int64_t i0 = d.causal ? j0 : 0; i0 < d.T; i0 += kTile) {
    __syncthreads();  // the previous query tile's Qs, dOs, Ps, dSs, lse_s, delta_s are read
    load_tile(Qs, q, 3 * d.C, i0, d);
    load_tile(dOs, dy, d.C, i0, d);
    if (threadIdx.x < kTile) {
      const int64_t t = i0 + threadIdx.x;
      lse_s[threadIdx.x] = t < d.T ? lse_h[t] : 0.0f;
      delta_s[threadIdx.x] = t < d.T ? delta_h[t] : 0.0f;
    }
    __syncthreads();  // (and Ks, Vs, on the first tile)

    // As query row r: the scores against this key tile.
    score_grads(Ps, dSs, Qs, dOs, Ks, Vs, lse_s[r], delta_s[r], i0, j0, r, sub, d);
    __syncthreads();  // Ps, dSs complete: each thread reads a column of them below

    // As key row r: dv += sum_i p_ir dO_i, dk += sum_i ds_ir q_i, i in query-row order.
    for (int ii = 0; ii < kTile; ++ii) {
      const float p = Ps[ii * kScoreLd + r], ds = dSs[ii * kScoreLd + r];
      const float* dyrow = dOs + ii * d.ld + sub;
      const float* qrow = Qs + ii * d.ld + sub;
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        if (c < ncols) {
          dv[c] += p * dyrow[kGroup * c];
          dk[c] += ds * qrow[kGroup * c];
        }
      }
    }
  }

  const int64_t j = j0 + r;
  if (j < d.T) {
    float* dkrow = dqkv + (b * d.T + j) * 3 * d.C + d.C + h * d.hs + sub;  // row stride 3C
    float* dvrow = dkrow + d.C;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      if (c < ncols) {
        dkrow[kGroup * c] = dk[c];
        dvrow[kGroup * c] = dv[c];
      }
    }
  }
}

// Dynamic shared memory of backward_q_kernel: Qs, dOs, Ks, Vs (kTile, ld), dSs (kTile, kScoreLd).
size_t backward_q_smem_bytes(const Dims& d) {
  return sizeof(float) * (4 * size_t(kTile) * d.ld + size_t(kTile) * kScoreLd);
}

// grid (B * NH, query tiles), the last query tile (most keys when causal)
// first. Writes the dq rows of its query tile.
template <int kMaxHS, class In>
__global__ void __launch_bounds__(kThreads) backward_q_kernel(float* dqkv, const In* dout, const float* lse,
                                                              const float* delta, const In* qkv, Dims d) {
  constexpr int kCols = kMaxHS / kGroup;
  extern __shared__ float smem[];
  float* Qs = smem;                 // (kTile, ld)
  float* dOs = Qs + kTile * d.ld;   // (kTile, ld)
  float* Ks = dOs + kTile * d.ld;   // (kTile, ld)
  float* Vs = Ks + kTile * d.ld;    // (kTile, ld)
  float* dSs = Vs + kTile * d.ld;   // (kTile, kScoreLd)

  const int64_t bh = blockIdx.x, b = bh / d.NH, h = bh % d.NH;
  const int64_t i0 = (int64_t(gridDim.y) - 1 - blockIdx.y) * kTile;
  const int r = threadIdx.x / kGroup, sub = threadIdx.x % kGroup;
  const int64_t i = i0 + r;  // this thread's query row
  const int ncols = d.hs / kGroup;
  const In* q = qkv + b * d.T * 3 * d.C + h * d.hs;  // (T, hs), row stride 3C
  const In* k = q + d.C;
  const In* v = q + 2 * d.C;
  const In* dy = dout + b * d.T * d.C + h * d.hs;    // (T, hs), row stride C
  const float lse_i = i < d.T ? lse[bh * d.T + i] : 0.0f;
  const float delta_i = i < d.T ? delta[bh * d.T + i] : 0.0f;

  load_tile(Qs, q, 3 * d.C, i0, d);
  load_tile(dOs, dy, d.C, i0, d);
  float dq[kCols];  // query row i, columns sub + kGroup * c
#pragma unroll
  for (int c = 0; c < kCols; ++c) dq[c] = 0.0f;

  const int64_t key_end = d.causal && i0 + kTile < d.T ? i0 + kTile : d.T;
  for (int64_t j0 = 0; j0 < key_end; j0 += kTile) {
    __syncthreads();  // the previous key tile's Ks, Vs, dSs are read
    load_tile(Ks, k, 3 * d.C, j0, d);
    load_tile(Vs, v, 3 * d.C, j0, d);
    __syncthreads();  // (and Qs, dOs, on the first tile)

    score_grads(nullptr, dSs, Qs, dOs, Ks, Vs, lse_i, delta_i, i0, j0, r, sub, d);
    __syncthreads();  // dSs row r complete

    // dq += sum_j ds_rj k_j, j in key order.
    for (int jj = 0; jj < kTile; ++jj) {
      const float ds = dSs[r * kScoreLd + jj];
      const float* krow = Ks + jj * d.ld + sub;
#pragma unroll
      for (int c = 0; c < kCols; ++c)
        if (c < ncols) dq[c] += ds * krow[kGroup * c];
    }
  }

  if (i < d.T) {
    float* dqrow = dqkv + (b * d.T + i) * 3 * d.C + h * d.hs + sub;  // row stride 3C
#pragma unroll
    for (int c = 0; c < kCols; ++c)
      if (c < ncols) dqrow[kGroup * c] = dq[c];
  }
}

// ---- launchers ----

// The head size, after checking the shape; throws DeviceError naming what is unsupported.
int checked_head_size(int64_t B, int64_t T, int64_t C, int64_t NH) {
  const std::string where = "attention (CUDA): ";
  if (B < 0 || T < 0) throw DeviceError(where + "negative B = " + std::to_string(B) + " or T = " + std::to_string(T));
  if (NH <= 0 || C <= 0 || C % NH != 0)
    throw DeviceError(where + "C = " + std::to_string(C) + " is not a positive multiple of NH = " + std::to_string(NH));
  const int64_t hs = C / NH;
  if (!attention_head_size_supported(hs))
    throw DeviceError(where + "head size " + std::to_string(hs) + " (C = " + std::to_string(C) + ", NH = " +
                      std::to_string(NH) + ") is not supported: a multiple of 8 from 8 to " +
                      std::to_string(kMaxHeadSize) + " is");
  if ((T + kTile - 1) / kTile > kMaxTiles)
    throw DeviceError(where + "T = " + std::to_string(T) + " is too long (at most " +
                      std::to_string(kMaxTiles * kTile) + ")");
  if (B * NH > int64_t(0x7fffffff)) throw DeviceError(where + "B * NH = " + std::to_string(B * NH) + " too large");
  return int(hs);
}

Dims make_dims(int64_t T, int64_t C, int64_t NH, int hs, bool causal) {
  return Dims{T, C, NH, hs, hs + 1, 1.0f / std::sqrt(static_cast<float>(hs)), causal};
}

dim3 tile_grid(int64_t B, int64_t NH, int64_t T) {
  return dim3(unsigned(B * NH), unsigned((T + kTile - 1) / kTile));
}

// Above 48 KiB a kernel must opt in to its dynamic shared memory.
template <class Kernel>
void allow_smem(Kernel* kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    MESHTRAIN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

template <int kMaxHS, class In, class Out>
void run_forward(Out* out, float* lse, const In* qkv, int64_t B, const Dims& d, cudaStream_t stream) {
  const size_t bytes = forward_smem_bytes(d);
  allow_smem(forward_kernel<kMaxHS, In, Out>, bytes);
  forward_kernel<kMaxHS, In, Out><<<tile_grid(B, d.NH, d.T), kThreads, bytes, stream>>>(out, lse, qkv, d);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

template <class In, class Out>
void launch_forward(Out* out, float* lse, const In* qkv, int64_t B, int64_t T, int64_t C, int64_t NH, bool causal,
                    cudaStream_t stream) {
  const int hs = checked_head_size(B, T, C, NH);
  if (B == 0 || T == 0) return;
  const Dims d = make_dims(T, C, NH, hs, causal);
  if (hs <= 64)
    run_forward<64>(out, lse, qkv, B, d, stream);
  else
    run_forward<128>(out, lse, qkv, B, d, stream);
}

template <int kMaxHS, class In>
void run_backward_tiles(float* dqkv, const In* dout, const float* lse, const float* delta, const In* qkv, int64_t B,
                        const Dims& d, cudaStream_t stream) {
  const dim3 grid = tile_grid(B, d.NH, d.T);
  const size_t kv_bytes = backward_kv_smem_bytes(d), q_bytes = backward_q_smem_bytes(d);
  allow_smem(backward_kv_kernel<kMaxHS, In>, kv_bytes);
  backward_kv_kernel<kMaxHS, In><<<grid, kThreads, kv_bytes, stream>>>(dqkv, dout, lse, delta, qkv, d);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
  allow_smem(backward_q_kernel<kMaxHS, In>, q_bytes);
  backward_q_kernel<kMaxHS, In><<<grid, kThreads, q_bytes, stream>>>(dqkv, dout, lse, delta, qkv, d);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

template <class In, class O>
void launch_backward(float* dqkv, float* delta, const In* dout, const O* out, const float* lse, const In* qkv,
                     int64_t B, int64_t T, int64_t C, int64_t NH, bool causal, cudaStream_t stream) {
  const int hs = checked_head_size(B, T, C, NH);
  if (B == 0 || T == 0) return;
  const Dims d = make_dims(T, C, NH, hs, causal);
  const int64_t rows = B * T * NH;
  delta_kernel<<<unsigned((rows + kDeltaWarps - 1) / kDeltaWarps), kDeltaWarps * kWarp, 0, stream>>>(delta, dout,
                                                                                                     out, d, rows);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
  if (hs <= 64)
    run_backward_tiles<64>(dqkv, dout, lse, delta, qkv, B, d, stream);
  else
    run_backward_tiles<128>(dqkv, dout, lse, delta, qkv, B, d, stream);
}

}  // namespace

bool attention_head_size_supported(int64_t hs) { return hs >= 8 && hs <= kMaxHeadSize && hs % 8 == 0; }

void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                       bool causal, cudaStream_t stream) {
  launch_forward(out, lse, qkv, B, T, C, NH, causal, stream);
}
void attention_forward(float* out, float* lse, const Bf16* qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                       bool causal, cudaStream_t stream) {
  launch_forward(out, lse, qkv, B, T, C, NH, causal, stream);
}
void attention_forward(Bf16* out, float* lse, const Bf16* qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                       bool causal, cudaStream_t stream) {
  launch_forward(out, lse, qkv, B, T, C, NH, causal, stream);
}

int64_t attention_backward_scratch_floats(int64_t B, int64_t T, int64_t NH) {
  return B > 0 && T > 0 && NH > 0 ? B * NH * T : 0;
}

void attention_backward(float* dqkv, float* delta, const float* dout, const float* out, const float* lse,
                        const float* qkv, int64_t B, int64_t T, int64_t C, int64_t NH, bool causal,
                        cudaStream_t stream) {
  launch_backward(dqkv, delta, dout, out, lse, qkv, B, T, C, NH, causal, stream);
}
void attention_backward(float* dqkv, float* delta, const Bf16* dout, const float* out, const float* lse,
                        const Bf16* qkv, int64_t B, int64_t T, int64_t C, int64_t NH, bool causal,
                        cudaStream_t stream) {
  launch_backward(dqkv, delta, dout, out, lse, qkv, B, T, C, NH, causal, stream);
}
void attention_backward(float* dqkv, float* delta, const Bf16* dout, const Bf16* out, const float* lse,
                        const Bf16* qkv, int64_t B, int64_t T, int64_t C, int64_t NH, bool causal,
                        cudaStream_t stream) {
  launch_backward(dqkv, delta, dout, out, lse, qkv, B, T, C, NH, causal, stream);
}

}  // namespace meshtrain::kernels::cuda
