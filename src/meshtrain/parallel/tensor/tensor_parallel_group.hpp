#pragma once
// Tensor parallelism's collectives for nn/'s layers (nn/tensor_parallel.hpp)
// over a process group: the group of one mesh's tensor axis.
//
// wire = bf16 (parallel.reduce_dtype): the activation collectives round
// their input to bf16, exchange half the bytes (comm's BF16: sums combined
// in fp32, rounded once per combining step, in a fixed order) and widen the
// result, exactly, into the caller's fp32 buffer.
#include <span>

#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/precision.hpp"
#include "meshtrain/kernels/bf16.hpp"
#include "meshtrain/nn/tensor_parallel.hpp"
#include "meshtrain/parallel/bf16_wire.hpp"

namespace meshtrain::parallel {

class TensorParallelGroup final : public nn::TensorParallelComm {
 public:
  // sequence_parallel: the layers shard their token-wise regions by rows
  // (nn/tensor_parallel.hpp), every rank of the group alike.
  explicit TensorParallelGroup(comm::ProcessGroup& group, bool sequence_parallel = false,
                               Precision wire = Precision::Fp32)
      : group_(group), sequence_parallel_(sequence_parallel), bf16_(wire == Precision::Bf16) {}
  int rank() const override { return group_.rank(); }
  int size() const override { return group_.size(); }
  bool sequence_parallel() const override { return sequence_parallel_; }
  void all_reduce_sum(float* data, size_t count) override {
    if (!bf16_) return all_reduce_sum_fp32(data, count);
    all_reduce_sum_in_bf16(group_, std::span<float>(data, count), wire_);
  }
  void all_reduce_sum_fp32(float* data, size_t count) override {
    group_.all_reduce(std::span<float>(data, count), comm::ReduceKind::Sum);
  }
  void all_reduce_max(float* data, size_t count) override {
    group_.all_reduce(std::span<float>(data, count), comm::ReduceKind::Max);
  }
  void all_reduce_min(int32_t* data, size_t count) override {
    group_.all_reduce(std::span<int32_t>(data, count), comm::ReduceKind::Min);
  }
  void all_gather(const float* in, float* out, size_t count_per_rank) override {
    const size_t count = count_per_rank * size_t(size());
    if (!bf16_) return group_.all_gather(std::span<const float>(in, count_per_rank), std::span<float>(out, count));
    wire_.ensure(count);
    Bf16* own = wire_.data() + size_t(rank()) * count_per_rank;
    kernels::to_bf16(in, own, count_per_rank);  // first: in may be out's chunk
    group_.all_gather(std::span<const Bf16>(own, count_per_rank), wire_.span());
    kernels::to_float(wire_.data(), out, count);
  }
  // In place over data: the copying reduce_scatter would allocate and fill a
  // scratch as large as data on every call.
  void reduce_scatter_sum(float* data, float* out, size_t count_per_rank) override {
    const size_t count = count_per_rank * size_t(size());
    if (!bf16_) {
      group_
          .reduce_scatter_in_place_async(std::span<float>(data, count), std::span<float>(out, count_per_rank),
                                         comm::ReduceKind::Sum)
          ->wait();
      return;
    }
    kernels::to_bf16(data, count, wire_);
    const std::span<Bf16> own = wire_.span().subspan(size_t(rank()) * count_per_rank, count_per_rank);
    group_.reduce_scatter_in_place_async(wire_.span(), own, comm::ReduceKind::Sum)->wait();
    kernels::to_float(own.data(), out, count_per_rank);
  }

 private:
  comm::ProcessGroup& group_;
  bool sequence_parallel_;
  bool bf16_;
  AlignedBuffer<Bf16> wire_{MemoryKind::Communication};  // bf16 wire only
};

}  // namespace meshtrain::parallel
