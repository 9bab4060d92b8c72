#pragma once
// LAMB's per-element arithmetic (optim/lamb.hpp), shared by the CPU kernels
// (kernels/lamb.cpp) and the CUDA ones (kernels/cuda/lamb.cu), so both
// compute the same bits. With t the step and its scalars formed once per
// step in double, rounded to float:
//   m = beta1 * m + (1 - beta1) * g      v = beta2 * v + (1 - beta2) * g^2
//   u = (m / (1 - beta1^t)) / (sqrt(v) / sqrt(1 - beta2^t) + eps) + wd * w
//   w -= scale * u,  scale = lr * trust (the view's)
#include <math.h>

#include <cstdint>

#include "meshtrain/core/hd.hpp"

namespace meshtrain::kernels {

struct LambStep {
  float b1, one_minus_b1, b2, one_minus_b2;
  float bc1;       // 1 - beta1^t
  float bc2_sqrt;  // sqrt(1 - beta2^t)
  float eps;
  float weight_decay;  // for chunks that decay; the others take 0
};

// One run of elements: optim/chunks.hpp's UpdateChunk resolved to the
// backend's pointers. No padding, so a table of them compares bytewise.
struct LambChunk {
  float* param;
  const float* grad;
  float* m;  // exp_avg
  float* v;  // exp_avg_sq
  int64_t size;
  int32_t decays;  // nonzero: the view takes weight decay and a trust ratio
  int32_t view;    // the view's index: where its scale is
};

MESHTRAIN_HD void lamb_moments_element(float& m, float& v, float g, const LambStep& s) {
  m = s.b1 * m + s.one_minus_b1 * g;
  v = s.b2 * v + s.one_minus_b2 * g * g;
}

// u, the update's direction before the trust ratio.
MESHTRAIN_HD float lamb_direction(float m, float v, float w, float wd, const LambStep& s) {
  return (m / s.bc1) / (sqrtf(v) / s.bc2_sqrt + s.eps) + wd * w;
}

}  // namespace meshtrain::kernels
