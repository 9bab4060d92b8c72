#pragma once
// Softmax cross-entropy over N rows of V logits with integer targets, fused:
// forward saves only the log-sum-exp of each row (N floats, not the N x V
// probabilities); backward recomputes the softmax from logits and lse.
// Targets must already be checked to lie in [0, V).
#include <cstdint>

namespace meshtrain::kernels {

// lse (N) and loss (N) = lse - logit[target] are written; returns how many
// rows have argmax == target (first maximum wins ties). Per-row losses, not a
// sum, come back so the caller can sum them in a fixed order.
int64_t softmax_xent_forward(float* lse, float* loss, const float* logits, const int32_t* targets,
                             int64_t N, int64_t V);

// dlogits (N, V) = (softmax(logits) - onehot(target)) * dloss, written;
// dlogits may alias logits (in place). dloss is d(total)/d(row loss), 1/N for a mean.
void softmax_xent_backward(float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                           int64_t N, int64_t V, float dloss);

}  // namespace meshtrain::kernels
