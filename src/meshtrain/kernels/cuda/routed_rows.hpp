#pragma once
// A mixture-of-experts layer's row moves on the GPU (kernels/routed_rows.hpp's
// CUDA twins), launched on `stream`, asynchronous. The bits are the CPU's:
// gathers copy; a combine's thread builds one element from base and its
// terms in j order, and a gate's gradient is one thread's sum in double in
// column order (routed_rows_math.hpp), the CPU's expressions.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace meshtrain::kernels::cuda {

void gather_rows(float* dst, const float* src, const int32_t* rows, int64_t n, int64_t C, cudaStream_t stream);
void combine_rows(float* out, const float* base, const float* src, const int32_t* offsets, const int32_t* rows,
                  const float* scales, int64_t N, int64_t C, cudaStream_t stream);
void gate_backward_rows(float* dy, float* dgates, const float* dout, const float* y, const int32_t* tokens,
                        const float* gates, int64_t n, int64_t C, cudaStream_t stream);

}  // namespace meshtrain::kernels::cuda
