#pragma once
// What a tensor-parallel layer needs from its group, injected so that nn/
// stays free of comm/ (parallel/tensor/ implements it over a process group).
// A layer given none is the serial layer.
#include <cstddef>
#include <cstdint>

namespace meshtrain::nn {

class TensorParallelComm {
 public:
  virtual ~TensorParallelComm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Each reduces `count` elements over the group in place, elementwise;
  // every rank gets the same bits.
  virtual void all_reduce_sum(float* data, size_t count) = 0;
  // The vocabulary-parallel loss: the row max of the logits over the shards.
  virtual void all_reduce_max(float* data, size_t count) = 0;
  // The vocabulary-parallel argmax: the lowest column index holding the max.
  virtual void all_reduce_min(int32_t* data, size_t count) = 0;
};

}  // namespace meshtrain::nn
