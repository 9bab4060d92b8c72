// GELU forward and backward: element-wise maps (kernel_util.cuh) around the
// shared scalar formulas, so the GPU and the CPU compute the same
// expressions (--fmad=false keeps nvcc from fusing them into FMAs).
#include "meshtrain/kernels/cuda/gelu.hpp"

#include "meshtrain/kernels/cuda/kernel_util.cuh"
#include "meshtrain/kernels/gelu_math.hpp"

namespace meshtrain::kernels::cuda {
namespace {

using kernels::detail::gelu_slope;
using kernels::detail::gelu_value;

struct GeluValue {
  __device__ float operator()(float x) const { return gelu_value(x); }
};
// The CPU's expression: dout * gelu'(x), in that order.
struct GeluGrad {
  __device__ float operator()(float x, float dy) const { return dy * gelu_slope(x); }
};
struct GeluValueBf16 {
  __device__ Bf16 operator()(Bf16 x) const { return ::meshtrain::to_bf16(gelu_value(::meshtrain::to_float(x))); }
};
// gelu_backward_rounded's expression: float(dout) * slope, then rounded.
struct GeluGradBf16 {
  __device__ Bf16 operator()(Bf16 x, Bf16 dy) const {
    return ::meshtrain::to_bf16(::meshtrain::to_float(dy) * gelu_slope(::meshtrain::to_float(x)));
  }
};

}  // namespace

void gelu_forward(float* out, const float* inp, int64_t n, cudaStream_t stream) {
  detail::map1(GeluValue{}, out, inp, n, stream);
}

void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n, cudaStream_t stream) {
  detail::map2(GeluGrad{}, dinp, inp, dout, n, stream);
}

void gelu_forward_bf16(Bf16* out16, const Bf16* inp16, int64_t n, cudaStream_t stream) {
  detail::map1(GeluValueBf16{}, out16, inp16, n, stream);
}

void gelu_backward_bf16(Bf16* dinp16, const Bf16* inp16, const Bf16* dout16, int64_t n, cudaStream_t stream) {
  detail::map2(GeluGradBf16{}, dinp16, inp16, dout16, n, stream);
}

}  // namespace meshtrain::kernels::cuda
