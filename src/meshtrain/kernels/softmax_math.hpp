#pragma once
// Online softmax statistics (Milakov and Gimelshein, 2018): over the values
// z_j seen so far, the largest (and its first index) and the sum of
// exp(z_j - max), rescaled whenever the max grows. A row's log-sum-exp is
// then max + log(sum) after one read of the row; partial statistics of
// disjoint parts merge in any tree. Shared by the CUDA fused classifier
// (kernels/cuda/classifier.cu) and testable on the CPU; exp is fast_exp,
// as kernels/cross_entropy.cpp's, whose argmax rule (first maximum wins)
// this keeps.
#include <cstdint>

#include "meshtrain/kernels/fast_math.hpp"

namespace meshtrain::kernels {

struct SoftmaxStats {
  float max;    // largest value seen; -FLT_MAX when none
  float sum;    // sum of exp(z - max) over the values seen
  int32_t arg;  // index of the first largest value; INT32_MAX when none
};

// Nothing seen. -FLT_MAX rather than -inf: exp(-FLT_MAX - m) is a clamped
// tiny value times a zero sum, where -inf - (-inf) would be NaN.
MESHTRAIN_HD SoftmaxStats softmax_stats_empty() { return SoftmaxStats{-3.40282347e38f, 0.0f, 2147483647}; }

// One more value z at index j.
MESHTRAIN_HD void softmax_stats_add(SoftmaxStats& s, float z, int32_t j) {
  if (z > s.max) {
    s.sum = s.sum * fast_exp(s.max - z) + 1.0f;
    s.max = z;
    s.arg = j;
  } else {
    s.sum += fast_exp(z - s.max);
    if (z == s.max && j < s.arg) s.arg = j;
  }
}

// The statistics of two disjoint parts. Symmetric bit for bit (addition
// commutes), so both partners of a butterfly get the same result.
MESHTRAIN_HD SoftmaxStats softmax_stats_merge(const SoftmaxStats& a, const SoftmaxStats& b) {
  const float m = a.max > b.max ? a.max : b.max;
  SoftmaxStats r;
  r.max = m;
  r.sum = a.sum * fast_exp(a.max - m) + b.sum * fast_exp(b.max - m);
  r.arg = a.max > b.max ? a.arg : (b.max > a.max ? b.arg : (a.arg < b.arg ? a.arg : b.arg));
  return r;
}

}  // namespace meshtrain::kernels
