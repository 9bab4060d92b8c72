#pragma once
// The vocabulary-parallel loss's per-row steps between its all-reduces
// (nn/vocab_parallel_cross_entropy.hpp), shared by the CPU's kernels
// (cross_entropy.cpp) and the GPU's (cuda/vocab_shard.cu), so the rows'
// arithmetic never leaves the device the logits are on.
#include <cmath>
#include <cstdint>

#include "meshtrain/kernels/fast_math.hpp"

namespace meshtrain::kernels {

// After the row max's all-reduce: a shard whose own max is the row's offers
// its first column holding it (local_arg, shard-relative, + v0), the others
// V, past every column, so the all-reduce min that follows is the serial
// argmax (first maximum wins).
MESHTRAIN_HD int32_t shard_argmax_candidate(float local_max, float row_max, int32_t local_arg, int64_t v0,
                                            int64_t V) {
  return local_max == row_max ? static_cast<int32_t>(v0 + local_arg) : static_cast<int32_t>(V);
}

// After the sums' all-reduce: the row's log-sum-exp, loss and hit (1 where
// the argmax is the target), as the serial forward writes them.
struct ShardLossRow {
  float lse, loss, hit;
};
MESHTRAIN_HD ShardLossRow shard_loss_row(float row_max, float sumexp, float target_logit, int32_t arg,
                                         int32_t target) {
  const float lse = row_max + logf(sumexp);
  return {lse, lse - target_logit, arg == target ? 1.0f : 0.0f};
}

}  // namespace meshtrain::kernels
