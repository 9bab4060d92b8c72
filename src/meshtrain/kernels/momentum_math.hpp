#pragma once
// SGD's and LARS's per-element update (optim/sgd.hpp, optim/lars.hpp),
// shared by the CPU kernels (kernels/momentum.cpp) and the CUDA ones
// (kernels/cuda/momentum.cu), so both compute the same bits. SGD is LARS
// with a trust ratio of 1 (1 * d is d, bit for bit):
//   d = trust * (g + wd * w)
//   buf = momentum * buf + d;  d = nesterov ? d + momentum * buf : buf   (with a buffer)
//   w -= lr * d
#include <cstdint>

#include "meshtrain/core/hd.hpp"

namespace meshtrain::kernels {

struct MomentumStep {
  float lr;
  float momentum;      // 0: no buffer
  float weight_decay;  // for chunks that decay; the others take 0
  bool nesterov;
};

// One run of elements: optim/chunks.hpp's UpdateChunk resolved to the
// backend's pointers. No padding, so a table of them compares bytewise.
struct MomentumChunk {
  float* param;
  const float* grad;
  float* momentum;  // the momentum buffer's run; null without momentum
  int64_t size;
  int32_t decays;  // nonzero: the view takes weight decay (and LARS adapts it)
  int32_t view;    // the view's index: where LARS's trust ratio is
};

// One element; buf is null without momentum.
MESHTRAIN_HD void momentum_element(float& w, float g, float* buf, float wd, float trust, const MomentumStep& s) {
  float d = trust * (g + wd * w);
  if (buf) {
    *buf = s.momentum * *buf + d;
    d = s.nesterov ? d + s.momentum * *buf : *buf;
  }
  w -= s.lr * d;
}

}  // namespace meshtrain::kernels
