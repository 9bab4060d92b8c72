#pragma once
// AdamW's per-element update, shared by the CPU optimizer (optim/adamw.cpp)
// and the CUDA one (kernels/cuda/adamw.cu), so both compute the same bits.
//   m = lerp(m, g, 1 - beta1)           v = beta2 * v + (1 - beta2) * g^2
//   denom = sqrt(v) / sqrt(1 - beta2^t) + eps
//   w = w * decay - lr / (1 - beta1^t) * m / denom
// The step's scalars are formed once per step in double and rounded to
// float (optim/adamw.hpp); the element math is float, as PyTorch's.
#include <math.h>

#include "meshtrain/core/hd.hpp"

namespace meshtrain::kernels {

struct AdamWStep {
  float decay_factor;  // 1 - lr * weight_decay, for tensors that decay
  float one_minus_b1, b2, one_minus_b2;
  float step_size;  // lr / (1 - beta1^t)
  float bc2_sqrt;   // sqrt(1 - beta2^t)
  float eps;
};

// One element. `decay` is s.decay_factor or 1 (a tensor without weight decay).
MESHTRAIN_HD void adamw_element(float& w, float g, float& m, float& v, float decay, const AdamWStep& s) {
  m += s.one_minus_b1 * (g - m);
  v = s.b2 * v + s.one_minus_b2 * g * g;
  const float denom = sqrtf(v) / s.bc2_sqrt + s.eps;
  w = w * decay - s.step_size * (m / denom);
}

}  // namespace meshtrain::kernels
