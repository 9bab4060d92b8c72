#pragma once
// Tensor parallelism's collectives for nn/'s layers (nn/tensor_parallel.hpp)
// over a process group: the group of one mesh's tensor axis.
#include <span>

#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/nn/tensor_parallel.hpp"

namespace meshtrain::parallel {

class TensorParallelGroup final : public nn::TensorParallelComm {
 public:
  explicit TensorParallelGroup(comm::ProcessGroup& group) : group_(group) {}
  int rank() const override { return group_.rank(); }
  int size() const override { return group_.size(); }
  void all_reduce_sum(float* data, size_t count) override {
    group_.all_reduce(std::span<float>(data, count), comm::ReduceKind::Sum);
  }
  void all_reduce_max(float* data, size_t count) override {
    group_.all_reduce(std::span<float>(data, count), comm::ReduceKind::Max);
  }
  void all_reduce_min(int32_t* data, size_t count) override {
    group_.all_reduce(std::span<int32_t>(data, count), comm::ReduceKind::Min);
  }

 private:
  comm::ProcessGroup& group_;
};

}  // namespace meshtrain::parallel
