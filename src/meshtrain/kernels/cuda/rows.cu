// Row-broadcast kernels (rows.hpp).
//
// Row passes: grid (column tiles, rows); a thread takes W consecutive
// columns (W = 4 where N, the row strides and every pointer allow a 128-bit
// pack, else 1) and walks rows blockIdx.y, blockIdx.y + gridDim.y, ...
//
// Column sums, deterministic (no float atomics). Terms: a chunk is
// kColumnSumChunk consecutive rows (the last may be shorter).
//   pass 1: grid (column tiles, chunks); a thread sums its W columns over
//           the chunk's rows in row order (forming each value as its op
//           says, and writing what the op writes) into partial[chunk];
//   finish: per column, thread y of 32 sums partial rows y, y + 32, ... in
//           order, then thread 0 adds the 32 sums in y order into dbias.
// The order depends on M and N only, never on W or the device.
#include "meshtrain/kernels/cuda/rows.hpp"

#include "meshtrain/kernels/cuda/gelu.hpp"
#include "meshtrain/kernels/cuda/kernel_util.cuh"
#include "meshtrain/kernels/gelu_math.hpp"

namespace meshtrain::kernels::cuda {
namespace {

using detail::aligned;
using detail::load_pack;
using detail::Pack;
using detail::store_pack;

constexpr int kBlock = 256;
constexpr int kPack = 4;
// The grid's y extent (rows or chunks); more are walked by striding.
using detail::kMaxGridY;

constexpr size_t kFloatPack = sizeof(Pack<float, kPack>);  // 16 bytes
constexpr size_t kBf16Pack = sizeof(Pack<Bf16, kPack>);    // 8 bytes

// ---- row passes ----

template <int W, class Op>
__global__ void __launch_bounds__(kBlock) rows_kernel(Op op, int64_t M, int64_t N) {
  const int64_t j = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * W;
  if (j >= N) return;  // W divides N when W > 1: a pack is all in or all out
  for (int64_t m = blockIdx.y; m < M; m += gridDim.y) op.template apply<W>(m, j);
}

// Whole warps, no more threads than a row's packs need.
int block_for(int64_t threads_per_row) {
  return int(std::min<int64_t>(kBlock, (threads_per_row + detail::kWarp - 1) / detail::kWarp * detail::kWarp));
}

// `packed`: N % kPack == 0 and every row start of every pointer aligned for a pack.
template <class Op>
void launch_rows(const Op& op, bool packed, int64_t M, int64_t N, cudaStream_t stream) {
  if (M <= 0 || N <= 0) return;
  const int64_t threads = packed ? N / kPack : N;
  const int block = block_for(threads);
  const dim3 grid(unsigned((threads + block - 1) / block), unsigned(std::min(M, kMaxGridY)));
  if (packed)
    rows_kernel<kPack><<<grid, block, 0, stream>>>(op, M, N);
  else
    rows_kernel<1><<<grid, block, 0, stream>>>(op, M, N);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

// kernels::fill_rows: r + bias, bias, r or 0 (copies keep their bits).
struct FillRowsOp {
  float* out;
  const float* bias;
  const float* residual;
  int64_t N;
  template <int W>
  __device__ void apply(int64_t m, int64_t j) const {
    const int64_t i = m * N + j;
    Pack<float, W> y;
    if (bias && residual) {
      const Pack<float, W> r = load_pack<W>(residual + i), b = load_pack<W>(bias + j);
#pragma unroll
      for (int k = 0; k < W; ++k) y.v[k] = r.v[k] + b.v[k];
    } else if (bias) {
      y = load_pack<W>(bias + j);
    } else if (residual) {
      y = load_pack<W>(residual + i);
    } else {
#pragma unroll
      for (int k = 0; k < W; ++k) y.v[k] = 0.0f;
    }
    store_pack<W>(out + i, y);
  }
};

// kernels::add_rows: out + ((bias or 0) + (residual or 0)).
struct AddRowsOp {
  float* out;
  const float* bias;
  const float* residual;
  int64_t N;
  template <int W>
  __device__ void apply(int64_t m, int64_t j) const {
    const int64_t i = m * N + j;
    Pack<float, W> o = load_pack<W>(out + i), b{}, r{};
    if (bias) b = load_pack<W>(bias + j);
    if (residual) r = load_pack<W>(residual + i);
#pragma unroll
    for (int k = 0; k < W; ++k) o.v[k] = o.v[k] + ((bias ? b.v[k] : 0.0f) + (residual ? r.v[k] : 0.0f));
    store_pack<W>(out + i, o);
  }
};

// C = (beta == 0 ? 0 : beta * C) [+ bias], C with row stride ldc.
struct ScaleAddBiasOp {
  float* C;
  int64_t ldc;
  float beta;
  const float* bias;
  template <int W>
  __device__ void apply(int64_t m, int64_t j) const {
    const int64_t i = m * ldc + j;
    Pack<float, W> c{}, b{};
    if (beta != 0.0f) c = load_pack<W>(C + i);
    if (bias) b = load_pack<W>(bias + j);
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const float v = beta == 0.0f ? 0.0f : beta * c.v[k];
      c.v[k] = bias ? v + b.v[k] : v;
    }
    store_pack<W>(C + i, c);
  }
};

// C (bf16) = bf16(0 + bias) or 0, C with row stride ldc.
struct BiasRowsBf16Op {
  Bf16* C;
  int64_t ldc;
  const float* bias;
  template <int W>
  __device__ void apply(int64_t m, int64_t j) const {
    Pack<float, W> b{};
    if (bias) b = load_pack<W>(bias + j);
    Pack<Bf16, W> h;
#pragma unroll
    for (int k = 0; k < W; ++k) h.v[k] = ::meshtrain::to_bf16(bias ? 0.0f + b.v[k] : 0.0f);
    store_pack<W>(C + m * ldc + j, h);
  }
};

struct ToBf16RowsOp {
  Bf16* dst;
  int64_t ld_dst;
  const float* src;
  int64_t ld_src;
  template <int W>
  __device__ void apply(int64_t m, int64_t j) const {
    const Pack<float, W> x = load_pack<W>(src + m * ld_src + j);
    Pack<Bf16, W> h;
#pragma unroll
    for (int k = 0; k < W; ++k) h.v[k] = ::meshtrain::to_bf16(x.v[k]);
    store_pack<W>(dst + m * ld_dst + j, h);
  }
};

// ---- fill ----

template <int W>
__global__ void __launch_bounds__(kBlock) fill_kernel(float* dst, int64_t n, float value) {
  const int64_t packs = n / W;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  Pack<float, W> p;
#pragma unroll
  for (int k = 0; k < W; ++k) p.v[k] = value;
  for (int64_t q = tid; q < packs; q += stride) store_pack<W>(dst + q * W, p);
  for (int64_t i = packs * W + tid; i < n; i += stride) dst[i] = value;
}

// ---- column sums ----

int64_t chunks_of(int64_t M) { return (M + kColumnSumChunk - 1) / kColumnSumChunk; }

template <int W, class Op>
__global__ void __launch_bounds__(kBlock) column_partials_kernel(Op op, float* partial, int64_t M, int64_t N) {
  const int64_t j = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * W;
  if (j >= N) return;
  const int64_t chunks = (M + kColumnSumChunk - 1) / kColumnSumChunk;
  for (int64_t p = blockIdx.y; p < chunks; p += gridDim.y) {
    const int64_t m0 = p * kColumnSumChunk;
    const int64_t m1 = m0 + kColumnSumChunk < M ? m0 + kColumnSumChunk : M;
    Pack<float, W> acc;
#pragma unroll
    for (int k = 0; k < W; ++k) acc.v[k] = 0.0f;
#pragma unroll 4
    for (int64_t m = m0; m < m1; ++m) {
      const Pack<float, W> v = op.template apply<W>(m, j);
#pragma unroll
      for (int k = 0; k < W; ++k) acc.v[k] += v.v[k];
    }
    store_pack<W>(partial + p * N + j, acc);
  }
}

// dbias (N) += the P partial rows summed in row order: block (kFinishCols,
// kFinishRows); thread y takes partial rows y, y + kFinishRows, ...; then
// thread y == 0 adds the kFinishRows sums in y order.
constexpr int kFinishCols = 32, kFinishRows = 32;

__global__ void __launch_bounds__(kFinishCols* kFinishRows)
    column_finish_kernel(float* dbias, const float* partial, int64_t P, int64_t N) {
  __shared__ float sums[kFinishRows][kFinishCols + 1];
  const int64_t c = int64_t(blockIdx.x) * kFinishCols + threadIdx.x;
  float acc = 0.0f;
  if (c < N)
    for (int64_t p = threadIdx.y; p < P; p += kFinishRows) acc += partial[p * N + c];
  sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < N) {
    float total = 0.0f;
    for (int y = 0; y < kFinishRows; ++y) total += sums[y][threadIdx.x];
    dbias[c] += total;
  }
}

// `packed`: as launch_rows, and the scratch aligned for a pack (cudaMalloc's is).
template <class Op>
void launch_column_sums(const Op& op, bool packed, float* dbias, float* scratch, int64_t M, int64_t N,
                        cudaStream_t stream) {
  if (M <= 0 || N <= 0) return;
  packed = packed && aligned(scratch, kFloatPack);
  const int64_t P = chunks_of(M);
  const int64_t threads = packed ? N / kPack : N;
  const int block = block_for(threads);
  const dim3 grid(unsigned((threads + block - 1) / block), unsigned(std::min(P, kMaxGridY)));
  if (packed)
    column_partials_kernel<kPack><<<grid, block, 0, stream>>>(op, scratch, M, N);
  else
    column_partials_kernel<1><<<grid, block, 0, stream>>>(op, scratch, M, N);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
  const dim3 finish_block(kFinishCols, kFinishRows);
  column_finish_kernel<<<unsigned((N + kFinishCols - 1) / kFinishCols), finish_block, 0, stream>>>(dbias, scratch,
                                                                                                  P, N);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

struct DoutOp {
  const float* dout;
  int64_t N;
  template <int W>
  __device__ Pack<float, W> apply(int64_t m, int64_t j) const {
    return load_pack<W>(dout + m * N + j);
  }
};

// dout, and dout16 = bf16(dout) written on the way.
struct DoutRoundedOp {
  const float* dout;
  Bf16* dout16;
  int64_t N;
  template <int W>
  __device__ Pack<float, W> apply(int64_t m, int64_t j) const {
    const int64_t i = m * N + j;
    const Pack<float, W> v = load_pack<W>(dout + i);
    Pack<Bf16, W> h;
#pragma unroll
    for (int k = 0; k < W; ++k) h.v[k] = ::meshtrain::to_bf16(v.v[k]);
    store_pack<W>(dout16 + i, h);
    return v;
  }
};

// d = float(dout) * gelu'(float(inp)), the CPU's expression; dinp16 =
// bf16(d) written on the way (it may alias dout: read first, same thread).
struct GeluGradOp {
  Bf16* dinp16;
  const Bf16* inp;
  const Bf16* dout;
  int64_t N;
  template <int W>
  __device__ Pack<float, W> apply(int64_t m, int64_t j) const {
    const int64_t i = m * N + j;
    const Pack<Bf16, W> x = load_pack<W>(inp + i), dy = load_pack<W>(dout + i);
    Pack<float, W> d;
    Pack<Bf16, W> h;
#pragma unroll
    for (int k = 0; k < W; ++k) {
      d.v[k] = ::meshtrain::to_float(dy.v[k]) * kernels::detail::gelu_slope(::meshtrain::to_float(x.v[k]));
      h.v[k] = ::meshtrain::to_bf16(d.v[k]);
    }
    store_pack<W>(dinp16 + i, h);
    return d;
  }
};

}  // namespace

void fill_rows(float* out, const float* bias, const float* residual, int64_t M, int64_t N, cudaStream_t stream) {
  const bool packed = N % kPack == 0 && aligned(out, kFloatPack) && aligned(bias, kFloatPack) &&
                      aligned(residual, kFloatPack);
  launch_rows(FillRowsOp{out, bias, residual, N}, packed, M, N, stream);
}

void add_rows(float* out, const float* bias, const float* residual, int64_t M, int64_t N, cudaStream_t stream) {
  if (!bias && !residual) return;
  const bool packed = N % kPack == 0 && aligned(out, kFloatPack) && aligned(bias, kFloatPack) &&
                      aligned(residual, kFloatPack);
  launch_rows(AddRowsOp{out, bias, residual, N}, packed, M, N, stream);
}

void fill(float* dst, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return;
  if (aligned(dst, kFloatPack))
    fill_kernel<kPack><<<detail::blocks_for((n + kPack - 1) / kPack, kBlock), kBlock, 0, stream>>>(dst, n, value);
  else
    fill_kernel<1><<<detail::blocks_for(n, kBlock), kBlock, 0, stream>>>(dst, n, value);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

int64_t column_sums_scratch_floats(int64_t M, int64_t N) { return M > 0 && N > 0 ? chunks_of(M) * N : 0; }

void bias_backward(float* dbias, const float* dout, int64_t M, int64_t N, float* scratch, cudaStream_t stream) {
  const bool packed = N % kPack == 0 && aligned(dout, kFloatPack);
  launch_column_sums(DoutOp{dout, N}, packed, dbias, scratch, M, N, stream);
}

void bias_backward_rounded(float* dbias, Bf16* dout16, const float* dout, int64_t M, int64_t N, float* scratch,
                           cudaStream_t stream) {
  const bool packed = N % kPack == 0 && aligned(dout, kFloatPack) && aligned(dout16, kBf16Pack);
  launch_column_sums(DoutRoundedOp{dout, dout16, N}, packed, dbias, scratch, M, N, stream);
}

void gelu_backward_rounded(Bf16* dinp16, float* dbias, const Bf16* inp, const Bf16* dout, int64_t M, int64_t N,
                           float* scratch, cudaStream_t stream) {
  if (M <= 0 || N <= 0) return;
  if (!dbias) return gelu_backward_bf16(dinp16, inp, dout, M * N, stream);  // the same expression, no sums
  const bool packed = N % kPack == 0 && aligned(dinp16, kBf16Pack) && aligned(inp, kBf16Pack) &&
                      aligned(dout, kBf16Pack);
  launch_column_sums(GeluGradOp{dinp16, inp, dout, N}, packed, dbias, scratch, M, N, stream);
}

void scale_add_bias_rows(float* C, int64_t ldc, float beta, const float* bias, int64_t M, int64_t N,
                         cudaStream_t stream) {
  const bool packed =
      N % kPack == 0 && ldc % kPack == 0 && aligned(C, kFloatPack) && aligned(bias, kFloatPack);
  launch_rows(ScaleAddBiasOp{C, ldc, beta, bias}, packed, M, N, stream);
}

void bias_rows_bf16(Bf16* C, int64_t ldc, const float* bias, int64_t M, int64_t N, cudaStream_t stream) {
  const bool packed = N % kPack == 0 && ldc % kPack == 0 && aligned(C, kBf16Pack) && aligned(bias, kFloatPack);
  launch_rows(BiasRowsBf16Op{C, ldc, bias}, packed, M, N, stream);
}

void to_bf16_rows(Bf16* dst, int64_t ld_dst, const float* src, int64_t ld_src, int64_t M, int64_t N,
                  cudaStream_t stream) {
  const bool packed = N % kPack == 0 && ld_dst % kPack == 0 && ld_src % kPack == 0 && aligned(dst, kBf16Pack) &&
                      aligned(src, kFloatPack);
  launch_rows(ToBf16RowsOp{dst, ld_dst, src, ld_src}, packed, M, N, stream);
}

}  // namespace meshtrain::kernels::cuda
