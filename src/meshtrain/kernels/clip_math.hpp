#pragma once
// The gradient-clipping factor of torch.nn.utils.clip_grad_norm_, shared by
// the CPU (optim/clip.cpp's clip_coefficient) and a CUDA kernel
// (kernels/cuda/global_norm.cu), where the factor never visits the host:
//   min(1, max_norm / (norm + 1e-6)), and 1 where norm is not finite (the
//   caller sees the norm and skips the step instead of spreading NaN).
#include "meshtrain/core/hd.hpp"

namespace meshtrain::kernels {

MESHTRAIN_HD float clip_factor(double norm, float max_norm) {
  // norm >= 0, so this is !isfinite(norm) (NaN fails every comparison).
  if (!(norm <= 1.7976931348623157e308)) return 1.0f;
  const double c = double(max_norm) / (norm + 1e-6);
  return float(c < 1.0 ? c : 1.0);  // std::min(1.0, c), NaN included
}

}  // namespace meshtrain::kernels
