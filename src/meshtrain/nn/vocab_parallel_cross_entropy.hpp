#pragma once
// Softmax cross-entropy over logits split by vocabulary columns, for a
// tensor-parallel group of TP ranks (Megatron's vocab-parallel loss): each
// rank holds logits (N, V/TP), columns [rank V/TP, (rank + 1) V/TP) of the
// whole (N, V), as the vocabulary-parallel wte's tied output layer makes
// them. The whole logits are never gathered (N x V floats); instead three
// small all-reduces combine per-row parts (the two sums travel together):
//   max          row max over the shards                        (N floats)
//   min          argmax: the lowest column holding that max     (N ints)
//   sum          exp sums under the global max, and the target  (2N floats)
//                logit (the shard holding the target adds it, the others 0)
// then lse = max + log(sum exp) and loss = lse - target logit, the same bits
// on every rank. The argmax is the serial one (first maximum wins): within a
// shard the first maximum, across shards the lowest column, so accuracy
// counts the same hits. Backward needs no communication: each rank writes
// softmax - onehot for its own columns from the whole row's lse. Every
// row's value stays on the logits' device (kernels between the all-reduces,
// kernels/vocab_shard_math.hpp); the host reads only the loss and the hits,
// summed in row order as the serial loss sums them.
//
// Without a group it is SoftmaxCrossEntropy, unchanged. With a group of one
// the same kernels in the same order give the serial bits.
#include <cstdint>

#include "meshtrain/core/device_array.hpp"
#include "meshtrain/nn/cross_entropy.hpp"
#include "meshtrain/nn/model.hpp"
#include "meshtrain/nn/tensor_parallel.hpp"

namespace meshtrain::nn {

class VocabParallelCrossEntropy {
 public:
  // V: the whole vocabulary. Throws Error when V does not divide by tp's size.
  VocabParallelCrossEntropy(kernels::Backend& backend, TensorParallelComm* tp, int64_t V);

  // Mean loss over N rows (the same on every rank) and how many argmaxes hit
  // the target. logits (N, V/TP): this rank's columns; targets (N) index the
  // whole vocabulary, throws if one is outside [0, V). Remembers both.
  ForwardResult forward(const float* logits, const int32_t* targets, int64_t N);

  // dlogits (N, V/TP) = d(mean loss) / d logits for this rank's columns,
  // written; may alias the logits.
  void backward(float* dlogits);

  // The serial loss, for the fused classifier; null under a group.
  SoftmaxCrossEntropy* serial() { return tp_ ? nullptr : &serial_; }

  int64_t vocab_begin() const { return v0_; }
  int64_t vocab_columns() const { return V_cols_; }

 private:
  kernels::Backend& backend_;
  TensorParallelComm* tp_;
  int64_t V_, v0_, V_cols_;
  SoftmaxCrossEntropy serial_;  // without a group
  const float* logits_ = nullptr;
  const int32_t* targets_ = nullptr;  // (N) the host's (on the CPU) or targets_staged_'s
  int64_t N_ = 0;
  // In the backend's memory, as the logits are.
  DeviceArray<float> row_max_{backend_.allocator(), MemoryKind::Activations};    // (N) the whole row's
  DeviceArray<float> local_max_{backend_.allocator(), MemoryKind::Activations};  // (N) this shard's
  DeviceArray<int32_t> argmax_{backend_.allocator(), MemoryKind::Activations};   // (N) whole-vocabulary column
  DeviceArray<float> sums_{backend_.allocator(), MemoryKind::Activations};       // (2N) sum exp, then target logit
  DeviceArray<float> lse_{backend_.allocator(), MemoryKind::Activations};        // (N)
  DeviceArray<float> loss_hits_{backend_.allocator(), MemoryKind::Activations};  // (2N) each row's loss, then hit
  DeviceArray<int32_t> targets_staged_{backend_.allocator(), MemoryKind::Activations};
};

}  // namespace meshtrain::nn
