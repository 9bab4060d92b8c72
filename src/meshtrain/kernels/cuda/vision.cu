// Patches and pooling (vision.hpp).
//
// patchify: a thread per output element (grid-stride), reading the pixel it
// copies; consecutive threads write consecutive elements of a patch row.
// meanpool_forward: a thread per (b, c) sums its column over t in order.
// meanpool_backward: grid (column tiles, rows of (B T, C)).
#include "meshtrain/kernels/cuda/vision.hpp"

#include "meshtrain/kernels/cuda/kernel_util.cuh"

namespace meshtrain::kernels::cuda {
namespace {

using detail::load_pack;
using detail::Pack;
using detail::store_pack;

constexpr int kBlock = 256;
using detail::kMaxGridY;

__global__ void __launch_bounds__(kBlock)
    patchify_kernel(float* patches, const float* pixels, int64_t total, int64_t ch, int64_t H, int64_t W, int64_t P,
                    int64_t gw, int64_t np) {
  const int64_t pdim = ch * P * P, PP = P * P;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t bp = i / pdim, r = i % pdim;  // patch bp (of B * np), element r = (k, py, px)
    const int64_t b = bp / np, gy = (bp % np) / gw, gx = bp % gw;
    const int64_t k = r / PP, py = (r % PP) / P, px = r % P;
    patches[i] = pixels[((b * ch + k) * H + gy * P + py) * W + gx * P + px];
  }
}

// out (B, C): i = b * C + c.
__global__ void __launch_bounds__(kBlock)
    meanpool_forward_kernel(float* out, const float* inp, int64_t B, int64_t T, int64_t C, float inv) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < B * C; i += stride) {
    const int64_t b = i / C, c = i % C;
    const float* x = inp + b * T * C + c;
    float acc = 0.0f;
    for (int64_t t = 0; t < T; ++t) acc += x[t * C];
    out[i] = acc * inv;
  }
}

template <int W>
__global__ void __launch_bounds__(kBlock)
    meanpool_backward_kernel(float* dinp, const float* dout, int64_t BT, int64_t T, int64_t C, float inv) {
  const int64_t c = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * W;
  if (c >= C) return;  // W divides C when W > 1
  for (int64_t bt = blockIdx.y; bt < BT; bt += gridDim.y) {
    Pack<float, W> d = load_pack<W>(dout + (bt / T) * C + c);
#pragma unroll
    for (int k = 0; k < W; ++k) d.v[k] = d.v[k] * inv;
    store_pack<W>(dinp + bt * C + c, d);
  }
}

// The CPU's 1.0f / T (T converted to float), computed on the host.
float inverse_of(int64_t T) { return 1.0f / static_cast<float>(T); }

}  // namespace

void patchify(float* patches, const float* pixels, int64_t B, int64_t ch, int64_t H, int64_t W, int64_t P,
              cudaStream_t stream) {
  if (B <= 0 || ch <= 0 || P <= 0) return;
  const int64_t gh = H / P, gw = W / P, np = gh * gw;
  const int64_t total = B * np * ch * P * P;
  if (total <= 0) return;
  patchify_kernel<<<detail::blocks_for(total, kBlock), kBlock, 0, stream>>>(patches, pixels, total, ch, H, W, P,
                                                                            gw, np);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

void meanpool_forward(float* out, const float* inp, int64_t B, int64_t T, int64_t C, cudaStream_t stream) {
  if (B <= 0 || C <= 0) return;
  meanpool_forward_kernel<<<detail::blocks_for(B * C, kBlock), kBlock, 0, stream>>>(out, inp, B, T, C,
                                                                                    inverse_of(T));
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

void meanpool_backward(float* dinp, const float* dout, int64_t B, int64_t T, int64_t C, cudaStream_t stream) {
  const int64_t BT = B * T;
  if (BT <= 0 || C <= 0) return;
  const size_t pack = sizeof(Pack<float, 4>);
  const bool packed = C % 4 == 0 && detail::aligned(dinp, pack) && detail::aligned(dout, pack);
  const int64_t threads = packed ? C / 4 : C;
  const int block = int(std::min<int64_t>(kBlock, (threads + 31) / 32 * 32));
  const dim3 grid(unsigned((threads + block - 1) / block), unsigned(std::min(BT, kMaxGridY)));
  if (packed)
    meanpool_backward_kernel<4><<<grid, block, 0, stream>>>(dinp, dout, BT, T, C, inverse_of(T));
  else
    meanpool_backward_kernel<1><<<grid, block, 0, stream>>>(dinp, dout, BT, T, C, inverse_of(T));
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace meshtrain::kernels::cuda
