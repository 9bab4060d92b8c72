// Token + position embedding.
//
// Forward: one block per (b, t) row; out = wte[token] + wpe[t], packs of 4
// floats where C and every pointer allow.
//
// Backward, deterministic. Terms: a run is a maximal stretch of equal ids
// in the sorted token list.
//   dwpe: a thread per (t, c) adds dout[b, t, c] for b = 0 .. B-1 in order.
//   dwte: sort the B*T token ids with their positions (CUB's radix sort is
//         stable, so within a run the positions stay increasing); then a
//         block per run start i adds, one column per thread, the run's
//         dout rows in run order into dwte[token]. Blocks whose i is not a
//         run start exit at once. A token repeated k times costs its block
//         k sequential steps, as on the CPU.
#include "meshtrain/kernels/cuda/encoder.hpp"

#include <cub/device/device_radix_sort.cuh>
#include <limits>
#include <string>

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/cuda/kernel_util.cuh"

namespace meshtrain::kernels::cuda {
namespace {

using detail::load_pack;
using detail::Pack;
using detail::store_pack;

constexpr int kBlock = 256;

template <int W>
__global__ void __launch_bounds__(kBlock)
    encoder_forward_kernel(float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t T,
                           int64_t C) {
  const int64_t bt = blockIdx.x;
  const float* e = wte + int64_t(tokens[bt]) * C;
  const float* p = wpe + (bt % T) * C;
  float* o = out + bt * C;
  for (int64_t c = int64_t(threadIdx.x) * W; c < C; c += int64_t(blockDim.x) * W) {
    const Pack<float, W> a = load_pack<W>(e + c), b = load_pack<W>(p + c);
    Pack<float, W> y;
#pragma unroll
    for (int k = 0; k < W; ++k) y.v[k] = a.v[k] + b.v[k];
    store_pack<W>(o + c, y);
  }
}

// dwpe (T, C) += sum over b of dout (B, T, C); i = t * C + c.
__global__ void __launch_bounds__(kBlock) dwpe_kernel(float* dwpe, const float* dout, int64_t B, int64_t TC) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < TC; i += stride) {
    float acc = dwpe[i];
    for (int64_t b = 0; b < B; ++b) acc += dout[b * TC + i];
    dwpe[i] = acc;
  }
}

__global__ void __launch_bounds__(kBlock) iota_kernel(int32_t* positions, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) positions[i] = int32_t(i);
}

// grid (BT, column tiles): block (i, y) handles columns y * kBlock + x,
// striding by the grid's columns, of the run starting at i.
__global__ void __launch_bounds__(kBlock) dwte_kernel(float* dwte, const float* dout, const int32_t* sorted_tokens,
                                                      const int32_t* sorted_positions, int64_t BT, int64_t C) {
  const int64_t i = blockIdx.x;
  const int32_t token = sorted_tokens[i];
  if (i > 0 && sorted_tokens[i - 1] == token) return;  // inside a run: its start's block has it
  float* row = dwte + int64_t(token) * C;
  const int64_t stride = int64_t(gridDim.y) * blockDim.x;
  for (int64_t c = int64_t(blockIdx.y) * blockDim.x + threadIdx.x; c < C; c += stride) {
    float acc = row[c];
    for (int64_t j = i; j < BT && sorted_tokens[j] == token; ++j) acc += dout[int64_t(sorted_positions[j]) * C + c];
    row[c] = acc;
  }
}

// The workspace, carved in 256-byte aligned pieces:
//   sorted tokens (BT), positions (BT), sorted positions (BT), CUB's scratch.
constexpr size_t kAlign = 256;
size_t round_up(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

size_t sort_scratch_bytes(int64_t BT) {
  size_t bytes = 0;
  MESHTRAIN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int32_t*>(nullptr),
                                                       static_cast<int32_t*>(nullptr),
                                                       static_cast<const int32_t*>(nullptr),
                                                       static_cast<int32_t*>(nullptr), BT));
  return bytes;
}

void check_token_count(int64_t BT) {
  // Positions are int32 (the sort's values), as token ids are.
  if (BT > std::numeric_limits<int32_t>::max())
    throw DeviceError("encoder: " + std::to_string(BT) + " tokens in one batch, more than int32 positions hold");
}

}  // namespace

void encoder_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B, int64_t T,
                     int64_t C, cudaStream_t stream) {
  const int64_t BT = B * T;
  check_token_count(BT);  // also the grid's limit: one block per row
  if (BT <= 0 || C <= 0) return;
  const size_t pack = sizeof(Pack<float, 4>);
  const bool packed =
      C % 4 == 0 && detail::aligned(out, pack) && detail::aligned(wte, pack) && detail::aligned(wpe, pack);
  // Whole warps, no more than a row's packs need (C = 768: 192 threads).
  const int64_t packs = packed ? C / 4 : C;
  const int block = int(std::min<int64_t>(kBlock, (packs + 31) / 32 * 32));
  if (packed)
    encoder_forward_kernel<4><<<unsigned(BT), block, 0, stream>>>(out, tokens, wte, wpe, T, C);
  else
    encoder_forward_kernel<1><<<unsigned(BT), block, 0, stream>>>(out, tokens, wte, wpe, T, C);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

size_t encoder_backward_workspace_bytes(int64_t B, int64_t T) {
  const int64_t BT = B * T;
  check_token_count(BT);
  if (BT <= 0) return 0;
  return 3 * round_up(size_t(BT) * sizeof(int32_t)) + round_up(sort_scratch_bytes(BT));
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B, int64_t T,
                      int64_t C, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const int64_t BT = B * T;
  check_token_count(BT);
  if (BT <= 0 || C <= 0) return;
  const size_t list_bytes = round_up(size_t(BT) * sizeof(int32_t));
  size_t scratch_bytes = sort_scratch_bytes(BT);
  const size_t needed = 3 * list_bytes + round_up(scratch_bytes);
  if (workspace_bytes < needed)
    throw DeviceError("encoder_backward: workspace of " + std::to_string(workspace_bytes) + " bytes, needs " +
                      std::to_string(needed) + " (encoder_backward_workspace_bytes)");

  dwpe_kernel<<<detail::blocks_for(T * C, kBlock), kBlock, 0, stream>>>(dwpe, dout, B, T * C);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());

  char* base = static_cast<char*>(workspace);
  auto* sorted_tokens = reinterpret_cast<int32_t*>(base);
  auto* positions = reinterpret_cast<int32_t*>(base + list_bytes);
  auto* sorted_positions = reinterpret_cast<int32_t*>(base + 2 * list_bytes);
  void* scratch = base + 3 * list_bytes;

  iota_kernel<<<detail::blocks_for(BT, kBlock), kBlock, 0, stream>>>(positions, BT);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
  MESHTRAIN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(scratch, scratch_bytes, tokens, sorted_tokens, positions,
                                                       sorted_positions, BT, 0, int(8 * sizeof(int32_t)), stream));
  const dim3 grid(unsigned(BT), detail::blocks_for(C, kBlock, 65535));
  dwte_kernel<<<grid, kBlock, 0, stream>>>(dwte, dout, sorted_tokens, sorted_positions, BT, C);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace meshtrain::kernels::cuda
