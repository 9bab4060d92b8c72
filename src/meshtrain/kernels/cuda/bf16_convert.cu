// fp32 <-> bf16 arrays: element-wise maps (kernel_util.cuh) around the
// scalar conversions every other path uses.
#include "meshtrain/kernels/cuda/bf16_convert.hpp"

#include "meshtrain/kernels/cuda/kernel_util.cuh"

namespace meshtrain::kernels::cuda {
namespace {

// Qualified: this namespace's array to_bf16 / to_float hide the scalar ones.
struct RoundToBf16 {
  __device__ Bf16 operator()(float x) const { return ::meshtrain::to_bf16(x); }
};
struct WidenToFloat {
  __device__ float operator()(Bf16 x) const { return ::meshtrain::to_float(x); }
};
struct WidenDivided {
  float divisor;
  __device__ float operator()(Bf16 x) const { return ::meshtrain::to_float(x) / divisor; }
};

}  // namespace

void to_bf16(const float* src, Bf16* dst, int64_t n, cudaStream_t stream) {
  detail::map1(RoundToBf16{}, dst, src, n, stream);
}

void to_float(const Bf16* src, float* dst, int64_t n, cudaStream_t stream) {
  detail::map1(WidenToFloat{}, dst, src, n, stream);
}

void widen_divided(const Bf16* src, float* dst, int64_t n, float divisor, cudaStream_t stream) {
  detail::map1(WidenDivided{divisor}, dst, src, n, stream);
}

}  // namespace meshtrain::kernels::cuda
