// Layer normalization: a warp per row.
//
// Forward: three passes over the row (in L1 after the first): the sum, the
// shifted squares (no E[x^2] - E[x]^2 cancellation, as on the CPU), then
// the outputs. The fused variant's first pass also forms residual = a + b
// and writes it; later passes read it back (each lane reads only what it
// wrote itself).
//
// Backward, deterministic. Terms: a block is kWarps warps of kRowsPerWarp
// rows each (kRowsPerBlock rows); a group is the kWarp * W columns one step
// of the warp covers.
//   pass 1 (per row): mean(dnorm) and mean(dnorm * xhat), dnorm = dout * weight;
//   pass 2 (per group): each warp writes dinp for its rows and sums its
//          rows' dout * xhat and dout per column, in row order; the block
//          adds its warps' sums in warp order into partials[block];
//   finish: dweight, dbias += the partials summed in block order.
#include "meshtrain/kernels/cuda/layernorm.hpp"

#include "meshtrain/kernels/cuda/kernel_util.cuh"
#include "meshtrain/kernels/layernorm.hpp"
#include "meshtrain/kernels/layernorm_math.hpp"

namespace meshtrain::kernels::cuda {
namespace {

using detail::kWarp;
using detail::load_pack;
using detail::Pack;
using detail::store_pack;
using detail::warp_sum;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * kWarp;
constexpr int kRowsPerWarp = 2;
constexpr int kRowsPerBlock = kWarps * kRowsPerWarp;

// ---- forward ----

// b == nullptr: normalize a. Else residual = a + b, normalized.
template <int W, class Out>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(Out* out, float* mean, float* rstd, float* residual, const float* a, const float* b,
                   const float* weight, const float* bias, int64_t N, int64_t C) {
  const int lane = threadIdx.x % kWarp;
  const int64_t n = int64_t(blockIdx.x) * kWarps + threadIdx.x / kWarp;
  if (n >= N) return;  // a whole warp: no block-wide sync below
  const int64_t row = n * C;
  const float* x = b ? residual + row : a + row;  // the row normalized

  float sum = 0;
  if (b) {
    for (int64_t c = int64_t(lane) * W; c < C; c += kWarp * W) {
      const Pack<float, W> pa = load_pack<W>(a + row + c), pb = load_pack<W>(b + row + c);
      Pack<float, W> r;
#pragma unroll
      for (int k = 0; k < W; ++k) {
        r.v[k] = pa.v[k] + pb.v[k];
        sum += r.v[k];
      }
      store_pack<W>(residual + row + c, r);
    }
  } else {
    for (int64_t c = int64_t(lane) * W; c < C; c += kWarp * W) {
      const Pack<float, W> p = load_pack<W>(x + c);
#pragma unroll
      for (int k = 0; k < W; ++k) sum += p.v[k];
    }
  }
  const float m = warp_sum(sum) / float(C);

  float var = 0;
  for (int64_t c = int64_t(lane) * W; c < C; c += kWarp * W) {
    const Pack<float, W> p = load_pack<W>(x + c);
#pragma unroll
    for (int k = 0; k < W; ++k) var += (p.v[k] - m) * (p.v[k] - m);
  }
  const float s = 1.0f / sqrtf(warp_sum(var) / float(C) + kLayerNormEps);

  for (int64_t c = int64_t(lane) * W; c < C; c += kWarp * W) {
    const Pack<float, W> p = load_pack<W>(x + c), w = load_pack<W>(weight + c), bb = load_pack<W>(bias + c);
    Pack<Out, W> y;
#pragma unroll
    for (int k = 0; k < W; ++k) detail::set_out(y.v[k], layernorm_out(p.v[k], m, s, w.v[k], bb.v[k]));
    store_pack<W>(out + row + c, y);
  }
  if (lane == 0) {
    if (mean) mean[n] = m;
    if (rstd) rstd[n] = s;
  }
}

template <class Out>
void launch_forward(Out* out, float* mean, float* rstd, float* residual, const float* a, const float* b,
                    const float* weight, const float* bias, int64_t N, int64_t C, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  const size_t pack = sizeof(Pack<float, 4>);
  // Null pointers count as aligned (b and residual when not fused).
  const bool packed = C % 4 == 0 && detail::aligned(out, sizeof(Pack<Out, 4>)) && detail::aligned(a, pack) &&
                      detail::aligned(b, pack) && detail::aligned(residual, pack) &&
                      detail::aligned(weight, pack) && detail::aligned(bias, pack);
  const unsigned grid = unsigned((N + kWarps - 1) / kWarps);
  if (packed)
    forward_kernel<4><<<grid, kThreads, 0, stream>>>(out, mean, rstd, residual, a, b, weight, bias, N, C);
  else
    forward_kernel<1><<<grid, kThreads, 0, stream>>>(out, mean, rstd, residual, a, b, weight, bias, N, C);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

// ---- backward ----

template <int W>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(float* dinp, float* part_dw, float* part_db, const float* dout, const float* inp,
                    const float* weight, const float* mean, const float* rstd, const float* dresid, int64_t N,
                    int64_t C) {
  constexpr int kGroup = kWarp * W;
  __shared__ float sh_dw[kWarps][kGroup];
  __shared__ float sh_db[kWarps][kGroup];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t row0 = int64_t(blockIdx.x) * kRowsPerBlock + warp * kRowsPerWarp;

  // Pass 1. Rows past N (the last block's) keep zeros and are skipped below.
  float m[kRowsPerWarp], s[kRowsPerWarp], mean_dnorm[kRowsPerWarp], mean_dnorm_xhat[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = s[r] = mean_dnorm[r] = mean_dnorm_xhat[r] = 0;
    const int64_t n = row0 + r;
    if (n < N) {  // the same for the whole warp: every lane reaches warp_sum
      m[r] = mean[n];
      s[r] = rstd[n];
      const float* x = inp + n * C;
      const float* dy = dout + n * C;
      float sum_dnorm = 0, sum_dnorm_xhat = 0;
      for (int64_t c = int64_t(lane) * W; c < C; c += kGroup) {
        const Pack<float, W> xv = load_pack<W>(x + c), dv = load_pack<W>(dy + c), wv = load_pack<W>(weight + c);
#pragma unroll
        for (int k = 0; k < W; ++k) {
          const float dnorm = dv.v[k] * wv.v[k];
          sum_dnorm += dnorm;
          sum_dnorm_xhat += dnorm * (xv.v[k] - m[r]) * s[r];
        }
      }
      mean_dnorm[r] = warp_sum(sum_dnorm) / float(C);
      mean_dnorm_xhat[r] = warp_sum(sum_dnorm_xhat) / float(C);
    }
  }

  // Pass 2.
  for (int64_t c0 = 0; c0 < C; c0 += kGroup) {
    const int64_t c = c0 + int64_t(lane) * W;
    float dw[W], db[W];
#pragma unroll
    for (int k = 0; k < W; ++k) dw[k] = db[k] = 0;
    if (c < C) {  // W divides C, so a pack is all in or all out
      const Pack<float, W> wv = load_pack<W>(weight + c);
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const int64_t n = row0 + r;
        if (n < N) {
          const int64_t i = n * C + c;
          const Pack<float, W> xv = load_pack<W>(inp + i), dv = load_pack<W>(dout + i);
          // dresid may alias dinp: read here, written below, same thread.
          const Pack<float, W> rv = dresid ? load_pack<W>(dresid + i) : Pack<float, W>{};
          Pack<float, W> dx;
#pragma unroll
          for (int k = 0; k < W; ++k) {
            const float g = layernorm_dinp(dv.v[k], xv.v[k], m[r], s[r], wv.v[k], mean_dnorm[r], mean_dnorm_xhat[r]);
            dx.v[k] = dresid ? rv.v[k] + g : g;  // no "+ 0": keeps the CPU's -0
            dw[k] += dv.v[k] * (xv.v[k] - m[r]) * s[r];
            db[k] += dv.v[k];
          }
          store_pack<W>(dinp + i, dx);
        }
      }
    }
#pragma unroll
    for (int k = 0; k < W; ++k) {
      sh_dw[warp][lane * W + k] = dw[k];
      sh_db[warp][lane * W + k] = db[k];
    }
    __syncthreads();
    const int64_t col = c0 + threadIdx.x;
    if (threadIdx.x < kGroup && col < C) {
      float sw = 0, sb = 0;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        sw += sh_dw[w][threadIdx.x];
        sb += sh_db[w][threadIdx.x];
      }
      part_dw[int64_t(blockIdx.x) * C + col] = sw;
      part_db[int64_t(blockIdx.x) * C + col] = sb;
    }
    __syncthreads();  // sh_* are rewritten by the next group
  }
}

// dweight, dbias (C) += the P partial rows summed in row order: block
// (kFinishCols, kFinishRows); thread y takes partial rows y, y + kFinishRows,
// ...; then thread y == 0 adds the kFinishRows sums in y order.
constexpr int kFinishCols = 32, kFinishRows = 32;

__global__ void __launch_bounds__(kFinishCols* kFinishRows)
    param_grads_kernel(float* dweight, float* dbias, const float* part_dw, const float* part_db, int64_t P,
                       int64_t C) {
  __shared__ float sw[kFinishRows][kFinishCols + 1];  // +1: no bank conflicts reading a column
  __shared__ float sb[kFinishRows][kFinishCols + 1];
  const int64_t c = int64_t(blockIdx.x) * kFinishCols + threadIdx.x;
  float aw = 0, ab = 0;
  if (c < C) {
    for (int64_t p = threadIdx.y; p < P; p += kFinishRows) {
      aw += part_dw[p * C + c];
      ab += part_db[p * C + c];
    }
  }
  sw[threadIdx.y][threadIdx.x] = aw;
  sb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    float tw = 0, tb = 0;
    for (int y = 0; y < kFinishRows; ++y) {
      tw += sw[y][threadIdx.x];
      tb += sb[y][threadIdx.x];
    }
    dweight[c] += tw;
    dbias[c] += tb;
  }
}

int64_t backward_blocks(int64_t N) { return (N + kRowsPerBlock - 1) / kRowsPerBlock; }

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t N, int64_t C, cudaStream_t stream) {
  launch_forward(out, mean, rstd, nullptr, inp, nullptr, weight, bias, N, C, stream);
}

void layernorm_forward_rounded(Bf16* out16, float* mean, float* rstd, const float* inp, const float* weight,
                               const float* bias, int64_t N, int64_t C, cudaStream_t stream) {
  launch_forward(out16, mean, rstd, nullptr, inp, nullptr, weight, bias, N, C, stream);
}

void residual_layernorm_forward(float* residual, float* out, float* mean, float* rstd, const float* a,
                                const float* b, const float* weight, const float* bias, int64_t N, int64_t C,
                                cudaStream_t stream) {
  launch_forward(out, mean, rstd, residual, a, b, weight, bias, N, C, stream);
}

void residual_layernorm_forward_rounded(float* residual, Bf16* out16, float* mean, float* rstd, const float* a,
                                        const float* b, const float* weight, const float* bias, int64_t N,
                                        int64_t C, cudaStream_t stream) {
  launch_forward(out16, mean, rstd, residual, a, b, weight, bias, N, C, stream);
}

int64_t layernorm_backward_scratch_floats(int64_t N, int64_t C) {
  return N > 0 && C > 0 ? 2 * backward_blocks(N) * C : 0;
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, const float* dresid, int64_t N,
                        int64_t C, float* scratch, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  const int64_t P = backward_blocks(N);
  float* part_dw = scratch;      // (P, C)
  float* part_db = scratch + P * C;  // (P, C)
  const size_t pack = sizeof(Pack<float, 4>);
  const bool packed = C % 4 == 0 && detail::aligned(dinp, pack) && detail::aligned(dout, pack) &&
                      detail::aligned(inp, pack) && detail::aligned(weight, pack) && detail::aligned(dresid, pack);
  if (packed)
    backward_kernel<4><<<unsigned(P), kThreads, 0, stream>>>(dinp, part_dw, part_db, dout, inp, weight, mean, rstd,
                                                             dresid, N, C);
  else
    backward_kernel<1><<<unsigned(P), kThreads, 0, stream>>>(dinp, part_dw, part_db, dout, inp, weight, mean, rstd,
                                                             dresid, N, C);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
  const dim3 block(kFinishCols, kFinishRows);
  param_grads_kernel<<<unsigned((C + kFinishCols - 1) / kFinishCols), block, 0, stream>>>(dweight, dbias, part_dw,
                                                                                         part_db, P, C);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace meshtrain::kernels::cuda
