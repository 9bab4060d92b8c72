#pragma once
// What a tensor-parallel layer needs from its group, injected so that nn/
// stays free of comm/ (parallel/tensor/ implements it over a process group).
// A layer given none is the serial layer.
#include <cstddef>

namespace meshtrain::nn {

class TensorParallelComm {
 public:
  virtual ~TensorParallelComm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Sums `count` floats over the group in place; every rank gets the same bits.
  virtual void all_reduce_sum(float* data, size_t count) = 0;
};

}  // namespace meshtrain::nn
