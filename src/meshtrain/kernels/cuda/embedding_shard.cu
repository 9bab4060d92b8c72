// A vocabulary shard of the token embedding (embedding_shard.hpp).
//
// Forward: one block per token row (striding when there are more rows than
// blocks); a copy of the shard's row or zeros, packs of 4 floats where C and
// every pointer allow.
//
// Backward, deterministic (encoder.cu's scheme, for a shard). Terms: a key
// is a token's row in the shard, or V_rows for a token outside it; a run is
// a maximal stretch of equal keys in the sorted key list.
//   keys: key and position n of every token;
//   sort: CUB's radix sort of (key, position) over the bits V_rows needs
//         (stable: within a run the positions stay increasing);
//   rows: a block per run start i (blocks whose i is not a run start, or
//         whose key is V_rows, exit at once) adds, one column per thread,
//         the run's dout rows in run order into dwte_rows[key].
#include "meshtrain/kernels/cuda/embedding_shard.hpp"

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
// Forward's grid: one block per row up to this many, then striding.
constexpr int64_t kMaxRowBlocks = int64_t(1) << 20;

template <int W>
__global__ void __launch_bounds__(kBlock)
    forward_kernel(float* out, const int32_t* tokens, const float* wte_rows, int64_t v0, int64_t V_rows, int64_t N,
                   int64_t C) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const int64_t row = int64_t(tokens[n]) - v0;
    const bool in_shard = row >= 0 && row < V_rows;
    const float* e = wte_rows + (in_shard ? row : 0) * C;
    float* o = out + n * C;
    for (int64_t c = int64_t(threadIdx.x) * W; c < C; c += int64_t(blockDim.x) * W) {
      Pack<float, W> y;
      if (in_shard) {
        y = load_pack<W>(e + c);
      } else {
#pragma unroll
        for (int k = 0; k < W; ++k) y.v[k] = 0.0f;
      }
      store_pack<W>(o + c, y);
    }
  }
}

// keys[n] = the token's row in the shard, or V_rows outside it; positions[n] = n.
__global__ void __launch_bounds__(kBlock)
    keys_kernel(uint32_t* keys, int32_t* positions, const int32_t* tokens, int64_t v0, int64_t V_rows, int64_t N) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; n < N; n += stride) {
    const int64_t row = int64_t(tokens[n]) - v0;
    keys[n] = uint32_t(row >= 0 && row < V_rows ? row : V_rows);
    positions[n] = int32_t(n);
  }
}

// grid (N, column tiles): block (i, y) handles columns y * blockDim.x + x,
// striding by the grid's columns, of the run starting at i.
__global__ void __launch_bounds__(kBlock)
    rows_kernel(float* dwte_rows, const float* dout, const uint32_t* sorted_keys, const int32_t* sorted_positions,
                int64_t V_rows, int64_t N, int64_t C) {
  const int64_t i = blockIdx.x;
  const uint32_t key = sorted_keys[i];
  if (int64_t(key) == V_rows) return;                // outside the shard
  if (i > 0 && sorted_keys[i - 1] == key) return;  // inside a run: its start's block has it
  float* row = dwte_rows + int64_t(key) * C;
  const int64_t stride = int64_t(gridDim.y) * blockDim.x;
  for (int64_t c = int64_t(blockIdx.y) * blockDim.x + threadIdx.x; c < C; c += stride) {
    float acc = row[c];
    for (int64_t j = i; j < N && sorted_keys[j] == key; ++j) acc += dout[int64_t(sorted_positions[j]) * C + c];
    row[c] = acc;
  }
}

// The workspace, carved in 256-byte aligned pieces: keys, sorted keys,
// positions, sorted positions (N each), CUB's scratch.
constexpr size_t kAlign = 256;
size_t round_up(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Keys lie in [0, V_rows]: the sort looks at this many low bits.
int key_bits(int64_t V_rows) {
  int bits = 1;
  while ((int64_t(1) << bits) <= V_rows) ++bits;
  return bits;
}

size_t sort_scratch_bytes(int64_t N, int64_t V_rows) {
  size_t bytes = 0;
  MESHTRAIN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), N, 0, key_bits(V_rows)));
  return bytes;
}

void check_sizes(int64_t N, int64_t V_rows) {
  // Positions are int32 (the sort's values), as are the grid's N blocks; keys
  // hold V_rows itself.
  if (N > std::numeric_limits<int32_t>::max())
    throw DeviceError("embedding_rows_backward: " + std::to_string(N) + " tokens, more than int32 positions hold");
  if (V_rows >= std::numeric_limits<int32_t>::max())
    throw DeviceError("embedding_rows_backward: a shard of " + std::to_string(V_rows) + " rows is too large");
}

size_t list_bytes(int64_t N, size_t element) { return round_up(size_t(N) * element); }

}  // namespace

void embedding_rows_forward(float* out, const int32_t* tokens, const float* wte_rows, int64_t v0, int64_t V_rows,
                            int64_t N, int64_t C, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  const size_t pack = sizeof(Pack<float, 4>);
  const bool packed = C % 4 == 0 && detail::aligned(out, pack) && detail::aligned(wte_rows, pack);
  const int64_t packs = packed ? C / 4 : C;
  const int block = int(std::min<int64_t>(kBlock, (packs + 31) / 32 * 32));
  const unsigned grid = unsigned(std::min(N, kMaxRowBlocks));
  if (packed)
    forward_kernel<4><<<grid, block, 0, stream>>>(out, tokens, wte_rows, v0, V_rows, N, C);
  else
    forward_kernel<1><<<grid, block, 0, stream>>>(out, tokens, wte_rows, v0, V_rows, N, C);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

size_t embedding_rows_backward_workspace_bytes(int64_t N, int64_t V_rows) {
  if (N <= 0 || V_rows <= 0) return 0;
  check_sizes(N, V_rows);
  return 2 * list_bytes(N, sizeof(uint32_t)) + 2 * list_bytes(N, sizeof(int32_t)) +
         round_up(sort_scratch_bytes(N, V_rows));
}

void embedding_rows_backward(float* dwte_rows, const float* dout, const int32_t* tokens, int64_t v0, int64_t V_rows,
                             int64_t N, int64_t C, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (N <= 0 || V_rows <= 0 || C <= 0) return;
  check_sizes(N, V_rows);
  const size_t keys_bytes = list_bytes(N, sizeof(uint32_t)), positions_bytes = list_bytes(N, sizeof(int32_t));
  size_t scratch_bytes = sort_scratch_bytes(N, V_rows);
  const size_t needed = 2 * keys_bytes + 2 * positions_bytes + round_up(scratch_bytes);
  if (workspace_bytes < needed)
    throw DeviceError("embedding_rows_backward: workspace of " + std::to_string(workspace_bytes) +
                      " bytes, needs " + std::to_string(needed) + " (embedding_rows_backward_workspace_bytes)");

  char* base = static_cast<char*>(workspace);
  auto* keys = reinterpret_cast<uint32_t*>(base);
  auto* sorted_keys = reinterpret_cast<uint32_t*>(base + keys_bytes);
  auto* positions = reinterpret_cast<int32_t*>(base + 2 * keys_bytes);
  auto* sorted_positions = reinterpret_cast<int32_t*>(base + 2 * keys_bytes + positions_bytes);
  void* scratch = base + 2 * keys_bytes + 2 * positions_bytes;

  keys_kernel<<<detail::blocks_for(N, kBlock), kBlock, 0, stream>>>(keys, positions, tokens, v0, V_rows, N);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
  MESHTRAIN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(scratch, scratch_bytes, keys, sorted_keys, positions,
                                                       sorted_positions, N, 0, key_bits(V_rows), stream));
  const dim3 grid(unsigned(N), detail::blocks_for(C, kBlock, 65535));
  rows_kernel<<<grid, kBlock, 0, stream>>>(dwte_rows, dout, sorted_keys, sorted_positions, V_rows, N, C);
  MESHTRAIN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace meshtrain::kernels::cuda
