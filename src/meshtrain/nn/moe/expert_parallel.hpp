#pragma once
// What a mixture-of-experts layer needs from its expert-parallel group,
// injected so that nn/ stays free of comm/ (parallel/expert/ implements it
// over a process group). Rank r of X holds experts [r E/X, (r+1) E/X); a
// layer given none holds every expert and dispatches to itself.
#include <cstddef>
#include <cstdint>
#include <span>

namespace meshtrain::nn {

class ExpertParallelComm {
 public:
  virtual ~ExpertParallelComm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank sends send_counts[d] floats to rank d, taken from `send` in
  // rank order, and receives recv_counts[s] floats from rank s into `recv`
  // in rank order (the counts must agree pairwise). send and recv are in
  // the layer's memory (its backend's: a device's off the CPU).
  virtual void all_to_all_v(const float* send, std::span<const size_t> send_counts, float* recv,
                            std::span<const size_t> recv_counts) = 0;
  // Fixed size: per_rank values to each rank, per_rank from each, in host
  // memory (the routing's counts).
  virtual void all_to_all(const int64_t* send, int64_t* recv, size_t per_rank) = 0;
};

}  // namespace meshtrain::nn
