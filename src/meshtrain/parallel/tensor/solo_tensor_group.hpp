#pragma once
// A stand-in for one rank of a tensor-parallel group of `size`, with no peers:
// a model built with it has that rank's layout (its shards' shapes and
// placements) and runs that rank's compute, while every collective leaves
// the data as it is. For what needs a rank's layout or its compute time but
// not its numbers: reading a checkpoint saved at another tensor width
// (train/train_checkpoint.cpp) and `plan --config`'s probe.
#include "meshtrain/nn/tensor_parallel.hpp"

namespace meshtrain::parallel {

class SoloTensorGroup final : public nn::TensorParallelComm {
 public:
  SoloTensorGroup(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(float*, size_t) override {}
  void all_reduce_max(float*, size_t) override {}
  void all_reduce_min(int32_t*, size_t) override {}

 private:
  int rank_, size_;
};

}  // namespace meshtrain::parallel
