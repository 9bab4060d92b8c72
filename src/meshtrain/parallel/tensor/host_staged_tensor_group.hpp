#pragma once
// Tensor parallelism's collectives for layers whose activations live in a
// device's memory, over the host's collectives (the host-staged path,
// docs/gpu.md): each call downloads its operand into host memory, runs the
// host group's collective there (fp32 or bf16 on the wire, as that group
// does) and uploads the result. The same sums in the same order as on the
// CPU, so the same bits; every call waits for the device, so it is a path
// for correctness (several ranks on one GPU, no NCCL), not for speed.
#include <cstdint>
#include <memory>
#include <span>

#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/device_buffer.hpp"
#include "meshtrain/nn/tensor_parallel.hpp"
#include "meshtrain/parallel/host_staging.hpp"

namespace meshtrain::parallel {

class HostStagedTensorGroup final : public nn::TensorParallelComm {
 public:
  // `host` runs the collectives on host memory; `device` is the memory the
  // layers' pointers are in.
  HostStagedTensorGroup(std::unique_ptr<nn::TensorParallelComm> host, DeviceAllocator& device)
      : host_(std::move(host)), device_(device) {}
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  bool sequence_parallel() const override { return host_->sequence_parallel(); }

  void all_reduce_sum(float* data, size_t count) override {
    on_host(&device_, {data, count}, staged_, [&](std::span<float> h) { host_->all_reduce_sum(h.data(), count); });
  }
  void all_reduce_sum_fp32(float* data, size_t count) override {
    on_host(&device_, {data, count}, staged_, [&](std::span<float> h) { host_->all_reduce_sum_fp32(h.data(), count); });
  }
  void all_reduce_max(float* data, size_t count) override {
    on_host(&device_, {data, count}, staged_, [&](std::span<float> h) { host_->all_reduce_max(h.data(), count); });
  }
  void all_reduce_min(int32_t* data, size_t count) override {
    indices_.ensure(count);
    device_.download(indices_.data(), data, count * sizeof(int32_t));
    host_->all_reduce_min(indices_.data(), count);
    device_.upload(data, indices_.data(), count * sizeof(int32_t));
  }
  void all_gather(const float* in, float* out, size_t count_per_rank) override {
    const size_t count = count_per_rank * size_t(size());
    staged_.ensure(count);
    float* own = staged_.data() + size_t(rank()) * count_per_rank;
    device_.download(own, in, count_per_rank * sizeof(float));
    host_->all_gather(own, staged_.data(), count_per_rank);
    device_.upload(out, staged_.data(), count * sizeof(float));
  }
  void reduce_scatter_sum(float* data, float* out, size_t count_per_rank) override {
    const size_t count = count_per_rank * size_t(size());
    staged_.ensure(count);
    device_.download(staged_.data(), data, count * sizeof(float));
    float* own = staged_.data() + size_t(rank()) * count_per_rank;
    host_->reduce_scatter_sum(staged_.data(), own, count_per_rank);
    device_.upload(out, own, count_per_rank * sizeof(float));
  }

 private:
  std::unique_ptr<nn::TensorParallelComm> host_;
  DeviceAllocator& device_;
  AlignedBuffer<float> staged_{MemoryKind::Communication};
  AlignedBuffer<int32_t> indices_{MemoryKind::Communication};
};

}  // namespace meshtrain::parallel
