#pragma once
// A stand-in for one rank of a tensor-parallel group of `size`, with no peers:
// a model built with it has that rank's layout (its shards' shapes and
// placements) and runs that rank's compute, while every collective leaves
// the data as it is. For what needs a rank's layout or its compute time but
// not its numbers: reading a checkpoint saved at another tensor width
// (train/loop/train_checkpoint.cpp) and `plan --config`'s probe. Given a
// backend, its copies run there (a probe on a device); else on the host.
#include <algorithm>

#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/nn/tensor_parallel.hpp"

namespace meshtrain::parallel {

class SoloTensorGroup final : public nn::TensorParallelComm {
 public:
  SoloTensorGroup(int rank, int size, bool sequence_parallel = false, kernels::Backend* backend = nullptr)
      : rank_(rank), size_(size), sequence_parallel_(sequence_parallel), backend_(backend) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool sequence_parallel() const override { return sequence_parallel_; }
  void all_reduce_sum(float*, size_t) override {}
  void all_reduce_sum_fp32(float*, size_t) override {}
  void all_reduce_max(float*, size_t) override {}
  void all_reduce_min(int32_t*, size_t) override {}
  // Its own chunk in every slot: the output is written whole, as a real
  // gather writes it (no uninitialized floats for the probe's compute).
  void all_gather(const float* in, float* out, size_t count_per_rank) override {
    float* own = out + size_t(rank_) * count_per_rank;
    if (in != own) copy(own, in, count_per_rank);  // first: in may be this slot
    for (int r = 0; r < size_; ++r)
      if (r != rank_) copy(out + size_t(r) * count_per_rank, own, count_per_rank);
  }
  // Its own chunk, as it is.
  void reduce_scatter_sum(float* data, float* out, size_t count_per_rank) override {
    const float* own = data + size_t(rank_) * count_per_rank;
    if (own != out) copy(out, own, count_per_rank);
  }

 private:
  void copy(float* dst, const float* src, size_t n) {
    if (backend_)
      backend_->copy(dst, src, n);
    else
      std::copy_n(src, n, dst);
  }

  int rank_, size_;
  bool sequence_parallel_;
  kernels::Backend* backend_;
};

}  // namespace meshtrain::parallel
