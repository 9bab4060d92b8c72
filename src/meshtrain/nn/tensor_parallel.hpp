#pragma once
// What a tensor-parallel layer needs from its group, injected so that nn/
// stays free of comm/ (parallel/tensor/ implements it over a process group).
// A layer given none is the serial layer.
//
// Sequence parallelism (Megatron's, optional): the regions between the
// tensor-parallel layers (layernorms, residual adds, the row-parallel bias,
// the position embedding) run on rows of the residual stream (N, C), N = B x
// T tokens b-major, rank r holding the contiguous rows [r N/TP, (r+1) N/TP).
// A column-parallel layer all-gathers its input rows where it would have read
// the whole input, a row-parallel one reduce-scatters its partial output
// where it would have all-reduced it; the communicated volume is the same.
// A replicated parameter whose gradient comes from a rank's rows only (the
// layernorms') sums it over the group before announcing it (layernorm.hpp).
#include <cstddef>
#include <cstdint>

namespace meshtrain::nn {

class TensorParallelComm {
 public:
  virtual ~TensorParallelComm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Whether the layers given this group shard their token-wise regions by rows.
  virtual bool sequence_parallel() const { return false; }
  // all_reduce_sum, all_gather and reduce_scatter_sum carry the layers'
  // activations and activation gradients: a group may send them in bf16
  // (parallel.reduce_dtype), each rank's values rounded and the sums
  // combined in fp32 and rounded back, so the results are bf16 values,
  // still the same bits on every rank.
  // Each reduces `count` elements over the group in place, elementwise;
  // every rank gets the same bits.
  virtual void all_reduce_sum(float* data, size_t count) = 0;
  // The same, always in fp32: the loss's statistics and partial weight
  // gradients, which a bf16 rounding would cost precision the step needs.
  virtual void all_reduce_sum_fp32(float* data, size_t count) = 0;
  // The vocabulary-parallel loss: the row max of the logits over the shards.
  virtual void all_reduce_max(float* data, size_t count) = 0;
  // The vocabulary-parallel argmax: the lowest column index holding the max.
  virtual void all_reduce_min(int32_t* data, size_t count) = 0;
  // out (size x count_per_rank) = the ranks' `in` (count_per_rank) in rank
  // order, the same bits on every rank. `in` may be out's chunk of this rank.
  virtual void all_gather(const float* in, float* out, size_t count_per_rank) = 0;
  // out (count_per_rank) = this rank's chunk of the elementwise sum of the
  // ranks' `data` (size x count_per_rank). data is the work area and is left
  // clobbered (no copy of it is made); out may be data's chunk of this rank.
  virtual void reduce_scatter_sum(float* data, float* out, size_t count_per_rank) = 0;
};

// How many of N rows each rank holds under sequence parallelism, N / size
// (rank r: rows [r N/size, (r+1) N/size)); throws Error when N does not
// divide by the group's size.
int64_t sequence_rows(const TensorParallelComm& tp, int64_t N);

// Whether tp (may be null) runs sequence-parallel.
inline bool sequence_parallel(const TensorParallelComm* tp) { return tp && tp->sequence_parallel(); }

}  // namespace meshtrain::nn
