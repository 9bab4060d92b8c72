#pragma once
// The vocabulary-parallel loss's kernels on a GPU (tensor parallelism: each
// rank holds columns [v0, v0 + V) of every row's logits), twins of
// kernels/cross_entropy.hpp's row_max_argmax, softmax_xent_shard_sums and
// softmax_xent_backward with a shard offset; one block per row for the two
// row reductions, in a fixed tree (deterministic). Within rounding of the
// CPU's (the row's sums are taken in another order); launched on `stream`,
// asynchronous.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace meshtrain::kernels::cuda {

// mx (N) = each row's largest logit, arg (N) its first column (0 .. V-1).
void row_max_argmax(float* mx, int32_t* arg, const float* logits, int64_t N, int64_t V, cudaStream_t stream);

// sumexp (N) = sum over the shard's columns of exp(logit - mx[n]);
// target_logit (N) = the target's logit when the shard holds it
// (v0 <= target < v0 + V), else 0.
void softmax_xent_shard_sums(float* sumexp, float* target_logit, const float* logits, const float* mx,
                             const int32_t* targets, int64_t N, int64_t V, int64_t v0, cudaStream_t stream);

// dlogits (N, V) = softmax over the whole row (lse (N) the whole row's) of
// the shard's columns, times dloss, less dloss at the target's column when
// the shard holds it; written, and may be logits itself.
void softmax_xent_shard_backward(float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                                 int64_t N, int64_t V, float dloss, int64_t v0, cudaStream_t stream);

// The rows' steps between the all-reduces (kernels/vocab_shard_math.hpp):
// arg (N, in place) = each row's argmax candidate; then lse, loss and hit
// (N each). One thread a row.
void shard_argmax_candidates(int32_t* arg, const float* local_max, const float* mx, int64_t N, int64_t v0, int64_t V,
                             cudaStream_t stream);
void shard_loss_rows(float* lse, float* loss, float* hit, const float* mx, const float* sumexp,
                     const float* target_logit, const int32_t* arg, const int32_t* targets, int64_t N,
                     cudaStream_t stream);

}  // namespace meshtrain::kernels::cuda
