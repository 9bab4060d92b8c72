#pragma once
// Softmax cross-entropy over N rows of V logits with integer targets, fused:
// forward saves only the log-sum-exp of each row (N floats, not the N x V
// probabilities); backward recomputes the softmax from logits and lse.
// Targets must already be checked to lie in [0, V).
#include <cstdint>

namespace meshtrain::kernels {

// lse (N), loss (N) = lse - logit[target] and hit (N) = 1 where the row's
// argmax is its target (first maximum wins ties), else 0, are written. Per
// row, not summed, so the caller sums them in a fixed order (the hits as
// floats, beside the losses: Backend::sums_in_order brings both at once).
void softmax_xent_forward(float* lse, float* loss, float* hit, const float* logits, const int32_t* targets, int64_t N,
                          int64_t V);

// dlogits (N, V) = (softmax(logits) - onehot(target)) * dloss, written;
// dlogits may alias logits (in place). dloss is d(total)/d(row loss), 1/N for a mean.
// With a vocabulary shard (below) the logits are columns [v0, v0 + V) and
// lse the whole row's; a target outside the shard gets no -dloss here.
void softmax_xent_backward(float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                           int64_t N, int64_t V, float dloss, int64_t v0 = 0);

// Vocabulary shards (tensor parallelism): a rank holds V columns of each
// row, [v0, v0 + V) of the whole vocabulary; targets are whole-vocabulary
// indices, already checked. The forward above, split so the shards can
// combine their parts: the row max (max over shards), then exp sums and the
// target logit (sums over shards), then lse = max + log(sum exp).

// mx (N) = each row's largest logit, arg (N) its first column (0 .. V-1).
void row_max_argmax(float* mx, int32_t* arg, const float* logits, int64_t N, int64_t V);
// sumexp (N) = sum over the shard's columns of exp(logit - mx), with mx (N)
// the max over every shard, and target_logit (N) = the target's logit when
// the shard holds it, else 0. Each is summed in column order, as the
// forward above sums, so one shard of the whole vocabulary gives its bits.
void softmax_xent_shard_sums(float* sumexp, float* target_logit, const float* logits, const float* mx,
                             const int32_t* targets, int64_t N, int64_t V, int64_t v0);
// Between the all-reduces (vocab_shard_math.hpp): arg (N) = each row's
// argmax candidate, from this shard's max and column (arg itself, in place)
// and the row's max; then lse, loss and hit (N each) from the row's max,
// exp sum and target logit and the argmax over every shard.
void shard_argmax_candidates(int32_t* arg, const float* local_max, const float* mx, int64_t N, int64_t v0, int64_t V);
void shard_loss_rows(float* lse, float* loss, float* hit, const float* mx, const float* sumexp,
                     const float* target_logit, const int32_t* arg, const int32_t* targets, int64_t N);

}  // namespace meshtrain::kernels
