#include "meshtrain/kernels/cuda/kernel_util.cuh"
#include "meshtrain/kernels/cuda/residual.hpp"

namespace meshtrain::kernels::cuda {
namespace {

struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};

}  // namespace

void residual_forward(float* out, const float* a, const float* b, int64_t n, cudaStream_t stream) {
  detail::map2(Add{}, out, a, b, n, stream);
}

}  // namespace meshtrain::kernels::cuda
