#pragma once
// Tensor parallelism's collectives for layers whose activations live in a
// device's memory: the layers' calls (nn/tensor_parallel.hpp) become the
// device collectives of the tensor axis's group (comm/device/), over NCCL
// where the job has it, else staged through host memory. Each call returns
// once its result is ordered before the layer's next kernel: over NCCL the
// compute stream waits on the communication stream's event, with no host
// synchronisation; staged, the result is back in the device's memory.
//
// A bf16 wire (parallel.reduce_dtype) rounds on the device before the
// collective and widens after it, as TensorParallelGroup does on the host,
// so the staged path gives the CPU's bits (the host group's sums in its
// order) and NCCL gives NCCL's bf16 sums. The bf16 staging buffer lives in
// the device's memory, counted as communication memory.
#include <cstdint>
#include <memory>

#include "meshtrain/comm/device/device_collectives.hpp"
#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/device_array.hpp"
#include "meshtrain/core/precision.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/nn/tensor_parallel.hpp"

namespace meshtrain::parallel {

class DeviceTensorGroup final : public nn::TensorParallelComm {
 public:
  // `backend` runs the rounding and copies in the memory the layers'
  // pointers are in.
  DeviceTensorGroup(std::unique_ptr<comm::DeviceCollectives> collectives, kernels::Backend& backend,
                    bool sequence_parallel = false, Precision wire = Precision::Fp32);
  int rank() const override { return collectives_->rank(); }
  int size() const override { return collectives_->size(); }
  bool sequence_parallel() const override { return sequence_parallel_; }

  void all_reduce_sum(float* data, size_t count) override;
  void all_reduce_sum_fp32(float* data, size_t count) override;
  void all_reduce_max(float* data, size_t count) override;
  void all_reduce_min(int32_t* data, size_t count) override;
  void all_gather(const float* in, float* out, size_t count_per_rank) override;
  void reduce_scatter_sum(float* data, float* out, size_t count_per_rank) override;

 private:
  // Bf16 staging of `count` elements in the device's memory.
  Bf16* wire(size_t count);

  std::unique_ptr<comm::DeviceCollectives> collectives_;
  kernels::Backend& backend_;
  bool sequence_parallel_;
  bool bf16_;
  DeviceArray<Bf16> wire_;
};

}  // namespace meshtrain::parallel
