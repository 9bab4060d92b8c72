#pragma once
// Expert parallelism's all-to-alls for layers whose rows live in a device's
// memory (nn/moe/moe_mlp.hpp off the CPU): the routed rows travel over the
// expert axis's device collectives (comm/device/), NCCL's grouped sends and
// receives where the job has it, else staged through host memory; the
// per-expert row counts go first over the axis's host group, since the host
// sizes the buffers and the exchange from them (the count exchange before
// the all-to-all, as Megatron's dispatcher does).
//
// A rank's own segment never travels: the backend copies it. A bf16 wire
// (parallel.reduce_dtype) rounds every segment on the device, the rank's
// own included, and widens on arrival, so the staged path gives
// ExpertParallelGroup's bits (the CPU's). Each call returns once the rows
// are ordered before the layer's next kernel (over NCCL, without a host
// synchronisation).
#include <memory>
#include <span>

#include "meshtrain/comm/device/device_collectives.hpp"
#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/device_array.hpp"
#include "meshtrain/core/precision.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/nn/moe/expert_parallel.hpp"

namespace meshtrain::parallel {

class DeviceExpertGroup final : public nn::ExpertParallelComm {
 public:
  // `rows` and `counts` are the same expert group; `backend` copies, rounds
  // and widens in the memory the layers' rows are in.
  DeviceExpertGroup(std::unique_ptr<comm::DeviceCollectives> rows, comm::ProcessGroup& counts,
                    kernels::Backend& backend, Precision wire = Precision::Fp32);
  int rank() const override { return rows_->rank(); }
  int size() const override { return rows_->size(); }
  void all_to_all_v(const float* send, std::span<const size_t> send_counts, float* recv,
                    std::span<const size_t> recv_counts) override;
  void all_to_all(const int64_t* send, int64_t* recv, size_t per_rank) override;

 private:
  std::unique_ptr<comm::DeviceCollectives> rows_;
  comm::ProcessGroup& counts_;
  kernels::Backend& backend_;
  bool bf16_;
  DeviceArray<Bf16> send16_, recv16_;  // bf16 wire only
};

}  // namespace meshtrain::parallel
