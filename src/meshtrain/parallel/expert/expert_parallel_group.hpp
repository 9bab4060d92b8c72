#pragma once
// Expert parallelism's all-to-alls for nn/'s mixture-of-experts layers
// (nn/moe/expert_parallel.hpp) over a process group: one mesh expert group,
// the ep consecutive data ranks that split the experts among them
// (comm/mesh/device_mesh.hpp).
#include <span>
#include <vector>

#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/nn/moe/expert_parallel.hpp"

namespace meshtrain::parallel {

class ExpertParallelGroup final : public nn::ExpertParallelComm {
 public:
  explicit ExpertParallelGroup(comm::ProcessGroup& group) : group_(group) {}
  int rank() const override { return group_.rank(); }
  int size() const override { return group_.size(); }
  void all_to_all_v(const float* send, std::span<const size_t> send_counts, float* recv,
                    std::span<const size_t> recv_counts) override {
    size_t sent = 0, received = 0;
    for (size_t n : send_counts) sent += n;
    for (size_t n : recv_counts) received += n;
    group_.all_to_all_v(std::span<const float>(send, sent),
                        std::vector<size_t>(send_counts.begin(), send_counts.end()), std::span<float>(recv, received),
                        std::vector<size_t>(recv_counts.begin(), recv_counts.end()));
  }
  void all_to_all(const int64_t* send, int64_t* recv, size_t per_rank) override {
    const size_t n = per_rank * size_t(size());
    group_.all_to_all(std::span<const int64_t>(send, n), std::span<int64_t>(recv, n));
  }

 private:
  comm::ProcessGroup& group_;
};

}  // namespace meshtrain::parallel
