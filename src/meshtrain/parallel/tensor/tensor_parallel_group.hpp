#pragma once
// Tensor parallelism's collectives for nn/'s layers (nn/tensor_parallel.hpp)
// over a process group: the group of one mesh's tensor axis.
#include <span>

#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/nn/tensor_parallel.hpp"

namespace meshtrain::parallel {

class TensorParallelGroup final : public nn::TensorParallelComm {
 public:
  // sequence_parallel: the layers shard their token-wise regions by rows
  // (nn/tensor_parallel.hpp), every rank of the group alike.
  explicit TensorParallelGroup(comm::ProcessGroup& group, bool sequence_parallel = false)
      : group_(group), sequence_parallel_(sequence_parallel) {}
  int rank() const override { return group_.rank(); }
  int size() const override { return group_.size(); }
  bool sequence_parallel() const override { return sequence_parallel_; }
  void all_reduce_sum(float* data, size_t count) override {
    group_.all_reduce(std::span<float>(data, count), comm::ReduceKind::Sum);
  }
  void all_reduce_max(float* data, size_t count) override {
    group_.all_reduce(std::span<float>(data, count), comm::ReduceKind::Max);
  }
  void all_reduce_min(int32_t* data, size_t count) override {
    group_.all_reduce(std::span<int32_t>(data, count), comm::ReduceKind::Min);
  }
  void all_gather(const float* in, float* out, size_t count_per_rank) override {
    group_.all_gather(std::span<const float>(in, count_per_rank),
                      std::span<float>(out, count_per_rank * size_t(size())));
  }
  // In place over data: the copying reduce_scatter would allocate and fill a
  // scratch as large as data on every call.
  void reduce_scatter_sum(float* data, float* out, size_t count_per_rank) override {
    group_
        .reduce_scatter_in_place_async(std::span<float>(data, count_per_rank * size_t(size())),
                                       std::span<float>(out, count_per_rank), comm::ReduceKind::Sum)
        ->wait();
  }

 private:
  comm::ProcessGroup& group_;
  bool sequence_parallel_;
};

}  // namespace meshtrain::parallel
