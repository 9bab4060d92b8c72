#pragma once
// out = a + b on the GPU, n elements; out may alias a or b (the bits of
// kernels::residual_forward: one IEEE addition per element).
#include <cuda_runtime_api.h>

#include <cstdint>

namespace meshtrain::kernels::cuda {

void residual_forward(float* out, const float* a, const float* b, int64_t n, cudaStream_t stream);

}  // namespace meshtrain::kernels::cuda
