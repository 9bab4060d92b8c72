// Routed rows (routed_rows.hpp): grid-stride kernels, a thread per output
// element (a gate's gradient: a thread per row, its dot product in the
// CPU's order).
#include "meshtrain/kernels/cuda/kernel_util.cuh"
#include "meshtrain/kernels/cuda/routed_rows.hpp"
#include "meshtrain/kernels/routed_rows_math.hpp"

namespace meshtrain::kernels::cuda {
namespace {

constexpr int kBlock = 256;

__global__ void __launch_bounds__(kBlock)
    gather_kernel(float* dst, const float* src, const int32_t* rows, int64_t n, int64_t C) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n * C; e += stride) {
    const int64_t i = e / C, c = e % C;
    dst[e] = src[int64_t(rows[i]) * C + c];
  }
}

__global__ void __launch_bounds__(kBlock)
    combine_kernel(float* out, const float* base, const float* src, const int32_t* offsets, const int32_t* rows,
                   const float* scales, int64_t N, int64_t C) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < N * C; e += stride) {
    const int64_t t = e / C, c = e % C;
    float acc = base ? base[e] : 0.0f;
    for (int32_t j = offsets[t]; j < offsets[t + 1]; ++j)
      acc = add_scaled(acc, scales, rows[j], src[int64_t(rows[j]) * C + c]);
    out[e] = acc;
  }
}

__global__ void __launch_bounds__(kBlock)
    gate_scale_kernel(float* dy, const float* dout, const int32_t* tokens, const float* gates, int64_t n, int64_t C) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n * C; e += stride) {
    const int64_t i = e / C, c = e % C;
    dy[e] = gates[i] * dout[int64_t(tokens[i]) * C + c];
  }
}

__global__ void __launch_bounds__(kBlock)
    gate_dot_kernel(float* dgates, const float* dout, const float* y, const int32_t* tokens, int64_t n, int64_t C) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dgates[i] = gate_gradient(dout + int64_t(tokens[i]) * C, y + i * C, C);
}

}  // namespace

void gather_rows(float* dst, const float* src, const int32_t* rows, int64_t n, int64_t C, cudaStream_t stream) {
  if (n <= 0 || C <= 0) return;
  gather_kernel<<<detail::blocks_for(n * C, kBlock), kBlock, 0, stream>>>(dst, src, rows, n, C);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

void combine_rows(float* out, const float* base, const float* src, const int32_t* offsets, const int32_t* rows,
                  const float* scales, int64_t N, int64_t C, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  combine_kernel<<<detail::blocks_for(N * C, kBlock), kBlock, 0, stream>>>(out, base, src, offsets, rows, scales, N, C);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

void gate_backward_rows(float* dy, float* dgates, const float* dout, const float* y, const int32_t* tokens,
                        const float* gates, int64_t n, int64_t C, cudaStream_t stream) {
  if (n <= 0 || C <= 0) return;
  gate_dot_kernel<<<detail::blocks_for(n, kBlock), kBlock, 0, stream>>>(dgates, dout, y, tokens, n, C);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
  gate_scale_kernel<<<detail::blocks_for(n * C, kBlock), kBlock, 0, stream>>>(dy, dout, tokens, gates, n, C);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace meshtrain::kernels::cuda
