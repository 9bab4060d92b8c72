#pragma once
// Expert parallelism's all-to-alls for nn/'s mixture-of-experts layers
// (nn/moe/expert_parallel.hpp) over a process group: one mesh expert group,
// the ep consecutive data ranks that split the experts among them
// (comm/mesh/device_mesh.hpp).
//
// wire = bf16 (parallel.reduce_dtype): the tokens (and in backward their
// gradients) travel rounded to bf16, half the bytes, and are widened
// (exactly) on arrival.
#include <span>
#include <vector>

#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/precision.hpp"
#include "meshtrain/kernels/bf16.hpp"
#include "meshtrain/nn/moe/expert_parallel.hpp"

namespace meshtrain::parallel {

class ExpertParallelGroup final : public nn::ExpertParallelComm {
 public:
  explicit ExpertParallelGroup(comm::ProcessGroup& group, Precision wire = Precision::Fp32)
      : group_(group), bf16_(wire == Precision::Bf16) {}
  int rank() const override { return group_.rank(); }
  int size() const override { return group_.size(); }
  void all_to_all_v(const float* send, std::span<const size_t> send_counts, float* recv,
                    std::span<const size_t> recv_counts) override {
    size_t sent = 0, received = 0;
    for (size_t n : send_counts) sent += n;
    for (size_t n : recv_counts) received += n;
    std::vector<size_t> s(send_counts.begin(), send_counts.end()), r(recv_counts.begin(), recv_counts.end());
    if (!bf16_) {
      group_.all_to_all_v(std::span<const float>(send, sent), std::move(s), std::span<float>(recv, received),
                          std::move(r));
      return;
    }
    kernels::to_bf16(send, sent, send16_);
    recv16_.ensure(received);
    group_.all_to_all_v(send16_.span(), std::move(s), recv16_.span(), std::move(r));
    kernels::to_float(recv16_.data(), recv, received);
  }
  void all_to_all(const int64_t* send, int64_t* recv, size_t per_rank) override {
    const size_t n = per_rank * size_t(size());
    group_.all_to_all(std::span<const int64_t>(send, n), std::span<int64_t>(recv, n));
  }

 private:
  comm::ProcessGroup& group_;
  bool bf16_;
  AlignedBuffer<Bf16> send16_{MemoryKind::Communication}, recv16_{MemoryKind::Communication};  // bf16 wire only
};

}  // namespace meshtrain::parallel
