#pragma once
// Layer normalization's per-element formulas given a row's statistics,
// shared by the CPU kernels (layernorm.cpp) and the CUDA ones
// (kernels/cuda/layernorm.cu). The row sums themselves are reductions whose
// order differs between a SIMD loop and a warp, so only these element steps
// match bit for bit across devices.
//   xhat = (x - mean) * rstd          out = xhat * weight + bias
//   dinp = rstd * (dout * weight - mean(dnorm) - xhat * mean(dnorm * xhat))
#include "meshtrain/core/hd.hpp"

namespace meshtrain::kernels {

MESHTRAIN_HD float layernorm_out(float x, float mean, float rstd, float weight, float bias) {
  return (x - mean) * rstd * weight + bias;
}

// dinp's element; mean_dnorm and mean_dnorm_xhat are the row's means of
// dout * weight and of dout * weight * xhat.
MESHTRAIN_HD float layernorm_dinp(float dout, float x, float mean, float rstd, float weight, float mean_dnorm,
                                  float mean_dnorm_xhat) {
  return rstd * (dout * weight - mean_dnorm - (x - mean) * rstd * mean_dnorm_xhat);
}

}  // namespace meshtrain::kernels
