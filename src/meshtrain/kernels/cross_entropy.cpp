#include "meshtrain/kernels/cross_entropy.hpp"

#include <cmath>

#include "meshtrain/kernels/fast_math.hpp"

namespace meshtrain::kernels {

int64_t softmax_xent_forward(float* lse, float* loss, const float* logits, const int32_t* targets,
                             int64_t N, int64_t V) {
  int64_t correct = 0;
#pragma omp parallel for schedule(static) reduction(+ : correct)
  for (int64_t n = 0; n < N; ++n) {
    const float* z = logits + n * V;  // (V)
    float mx = z[0];
    int64_t arg = 0;
    for (int64_t j = 1; j < V; ++j) {
      if (z[j] > mx) {
        mx = z[j];
        arg = j;
      }
    }
    float sum = 0;
    for (int64_t j = 0; j < V; ++j) sum += fast_exp(z[j] - mx);
    // Shifting by the max keeps every exp in (0, 1]: no overflow at any scale.
    lse[n] = mx + std::log(sum);
    loss[n] = lse[n] - z[targets[n]];
    correct += arg == targets[n];
  }
  return correct;
}

void softmax_xent_backward(float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                           int64_t N, int64_t V, float dloss) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* z = logits + n * V;
    float* dz = dlogits + n * V;
    const float m = lse[n];
    for (int64_t j = 0; j < V; ++j) dz[j] = fast_exp(z[j] - m) * dloss;
    dz[targets[n]] -= dloss;
  }
}

}  // namespace meshtrain::kernels
