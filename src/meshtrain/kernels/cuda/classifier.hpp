#pragma once
// The fused classifier (llm.c's fused_classifier): softmax, cross-entropy
// and the logits' gradient in one kernel, one block per row, so the (N, V)
// probabilities are never stored. Matches kernels/cross_entropy.hpp
// (softmax_xent_forward, then softmax_xent_backward) within rounding: the
// row's sums are taken in another order, the per-element gradient is the
// same expression. Launched on `stream`, asynchronous.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace meshtrain::kernels::cuda {

// For each row n of logits (N, V), t = targets[n] (< V; t < 0 marks the
// row as ignored, like PyTorch's ignore_index):
//   lse[n]     = log sum_j exp(logits[n, j])            (every row)
//   loss[n]    = lse[n] - logits[n, t]; 0 when ignored  (per row, not a
//                sum: the caller sums in a fixed order and divides, as
//                nn::SoftmaxCrossEntropy does, by the rows not ignored)
//   hit[n]     = 1 where argmax_j logits[n, j] == t (first maximum wins),
//                else 0, as a float (summed with the loss's rows); 0 when
//                ignored; hit may be null
//   dlogits[n, j] = (softmax_j - [j == t]) * dloss, written; all zeros
//                when ignored. dloss = d(loss total) / d(row loss): 1/N for
//                the mean over N rows.
// dlogits may be logits itself (in place) or null (forward only: evaluation).
void fused_classifier(float* lse, float* loss, float* hit, float* dlogits, const float* logits,
                      const int32_t* targets, int64_t N, int64_t V, float dloss, cudaStream_t stream);

}  // namespace meshtrain::kernels::cuda
