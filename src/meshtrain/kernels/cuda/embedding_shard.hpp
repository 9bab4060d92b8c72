#pragma once
// A vocabulary shard of the token embedding on the GPU (kernels/embedding.hpp's
// embedding_rows_*): wte_rows (V_rows, C) holds rows [v0, v0 + V_rows) of
// wte; tokens outside the shard give zero rows forward and no gradient
// backward. Launched on `stream`, asynchronous.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace meshtrain::kernels::cuda {

// out (N, C) = wte_rows[tokens[n] - v0] for tokens in the shard, 0 for the
// others, written (copies: the CPU's bits).
void embedding_rows_forward(float* out, const int32_t* tokens, const float* wte_rows, int64_t v0, int64_t V_rows,
                            int64_t N, int64_t C, cudaStream_t stream);

// Bytes of device scratch embedding_rows_backward needs for N tokens and a
// shard of V_rows rows (it sorts them). Asks CUB, so it needs a current CUDA
// device; the size depends only on N, V_rows and the device.
size_t embedding_rows_backward_workspace_bytes(int64_t N, int64_t V_rows);

// dwte_rows (V_rows, C) += dout (N, C) at the rows of the shard's tokens, as
// kernels::embedding_rows_backward, with its bits: each element adds its
// terms one by one in increasing n, the CPU's order (a stable sort of the
// tokens by shard row, then one block per run of equal rows). No float
// atomics. workspace: embedding_rows_backward_workspace_bytes(N, V_rows)
// bytes, 256-byte aligned (cudaMalloc's are).
void embedding_rows_backward(float* dwte_rows, const float* dout, const int32_t* tokens, int64_t v0, int64_t V_rows,
                             int64_t N, int64_t C, void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace meshtrain::kernels::cuda
