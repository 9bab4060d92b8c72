// Position adds (positions.hpp).
//
// Forward: grid (column tiles, rows): a thread adds W consecutive columns
// of rows blockIdx.y, blockIdx.y + gridDim.y, ... (W = 4 where C and the
// pointers allow a 128-bit pack).
// Backward: a thread per (t, c) adds dout[b, t, c] for b = 0 .. B-1 in
// order (encoder.cu's dwpe).
#include "meshtrain/kernels/cuda/positions.hpp"

#include "meshtrain/kernels/cuda/kernel_util.cuh"

namespace meshtrain::kernels::cuda {
namespace {

using detail::load_pack;
using detail::Pack;
using detail::store_pack;

constexpr int kBlock = 256;
using detail::kMaxGridY;

template <int W>
__global__ void __launch_bounds__(kBlock)
    forward_kernel(float* x, const float* pos, int64_t row0, int64_t rows, int64_t T, int64_t C) {
  const int64_t c = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * W;
  if (c >= C) return;  // W divides C when W > 1
  for (int64_t n = blockIdx.y; n < rows; n += gridDim.y) {
    const Pack<float, W> p = load_pack<W>(pos + ((row0 + n) % T) * C + c);
    Pack<float, W> o = load_pack<W>(x + n * C + c);
#pragma unroll
    for (int k = 0; k < W; ++k) o.v[k] = o.v[k] + p.v[k];
    store_pack<W>(x + n * C + c, o);
  }
}

// dpos (T, C) += sum over b of dout (B, T, C); i = t * C + c.
__global__ void __launch_bounds__(kBlock) backward_kernel(float* dpos, const float* dout, int64_t B, int64_t TC) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < TC; i += stride) {
    float acc = dpos[i];
    for (int64_t b = 0; b < B; ++b) acc += dout[b * TC + i];
    dpos[i] = acc;
  }
}

}  // namespace

void position_add_rows_forward(float* x, const float* pos, int64_t row0, int64_t rows, int64_t T, int64_t C,
                               cudaStream_t stream) {
  if (rows <= 0 || T <= 0 || C <= 0) return;
  const size_t pack = sizeof(Pack<float, 4>);
  const bool packed = C % 4 == 0 && detail::aligned(x, pack) && detail::aligned(pos, pack);
  const int64_t threads = packed ? C / 4 : C;
  const int block = int(std::min<int64_t>(kBlock, (threads + 31) / 32 * 32));
  const dim3 grid(unsigned((threads + block - 1) / block), unsigned(std::min(rows, kMaxGridY)));
  if (packed)
    forward_kernel<4><<<grid, block, 0, stream>>>(x, pos, row0, rows, T, C);
  else
    forward_kernel<1><<<grid, block, 0, stream>>>(x, pos, row0, rows, T, C);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

void position_add_forward(float* x, const float* pos, int64_t B, int64_t T, int64_t C, cudaStream_t stream) {
  position_add_rows_forward(x, pos, 0, B * T, T, C, stream);
}

void position_add_backward(float* dpos, const float* dout, int64_t B, int64_t T, int64_t C, cudaStream_t stream) {
  if (B <= 0 || T <= 0 || C <= 0) return;
  backward_kernel<<<detail::blocks_for(T * C, kBlock), kBlock, 0, stream>>>(dpos, dout, B, T * C);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace meshtrain::kernels::cuda
