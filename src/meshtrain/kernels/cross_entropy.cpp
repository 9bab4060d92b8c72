#include "meshtrain/kernels/cross_entropy.hpp"

#include <cmath>

#include "meshtrain/core/cpu_dispatch.hpp"
#include "meshtrain/kernels/fast_math.hpp"
#include "meshtrain/kernels/vocab_shard_math.hpp"

namespace meshtrain::kernels {

namespace {

// The largest of z[0 .. V) and, in arg, its first index.
inline float row_max(const float* z, int64_t V, int64_t& arg) {
  float mx = z[0];
  arg = 0;
  for (int64_t j = 1; j < V; ++j) {
    if (z[j] > mx) {
      mx = z[j];
      arg = j;
    }
  }
  return mx;
}

}  // namespace

MESHTRAIN_HOT_LOOP
void softmax_xent_forward(float* lse, float* loss, float* hit, const float* logits, const int32_t* targets, int64_t N,
                          int64_t V) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* z = logits + n * V;  // (V)
    int64_t arg;
    const float mx = row_max(z, V, arg);
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < V; ++j) sum += fast_exp(z[j] - mx);
    // Shifting by the max keeps every exp in (0, 1]: no overflow at any scale.
    lse[n] = mx + std::log(sum);
    loss[n] = lse[n] - z[targets[n]];
    hit[n] = arg == targets[n] ? 1.0f : 0.0f;
  }
}

MESHTRAIN_HOT_LOOP
void softmax_xent_backward(float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                           int64_t N, int64_t V, float dloss, int64_t v0) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* z = logits + n * V;
    float* dz = dlogits + n * V;
    const float m = lse[n];
    for (int64_t j = 0; j < V; ++j) dz[j] = fast_exp(z[j] - m) * dloss;
    const int64_t t = targets[n] - v0;
    if (t >= 0 && t < V) dz[t] -= dloss;
  }
}

MESHTRAIN_HOT_LOOP
void row_max_argmax(float* mx, int32_t* arg, const float* logits, int64_t N, int64_t V) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    int64_t a;
    mx[n] = row_max(logits + n * V, V, a);
    arg[n] = static_cast<int32_t>(a);
  }
}

MESHTRAIN_HOT_LOOP
void softmax_xent_shard_sums(float* sumexp, float* target_logit, const float* logits, const float* mx,
                             const int32_t* targets, int64_t N, int64_t V, int64_t v0) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* z = logits + n * V;
    const float m = mx[n];
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < V; ++j) sum += fast_exp(z[j] - m);
    sumexp[n] = sum;
    const int64_t t = targets[n] - v0;
    target_logit[n] = t >= 0 && t < V ? z[t] : 0.0f;
  }
}

void shard_argmax_candidates(int32_t* arg, const float* local_max, const float* mx, int64_t N, int64_t v0, int64_t V) {
  for (int64_t n = 0; n < N; ++n) arg[n] = shard_argmax_candidate(local_max[n], mx[n], arg[n], v0, V);
}

void shard_loss_rows(float* lse, float* loss, float* hit, const float* mx, const float* sumexp,
                     const float* target_logit, const int32_t* arg, const int32_t* targets, int64_t N) {
  for (int64_t n = 0; n < N; ++n) {
    const ShardLossRow row = shard_loss_row(mx[n], sumexp[n], target_logit[n], arg[n], targets[n]);
    lse[n] = row.lse;
    loss[n] = row.loss;
    hit[n] = row.hit;
  }
}

}  // namespace meshtrain::kernels
