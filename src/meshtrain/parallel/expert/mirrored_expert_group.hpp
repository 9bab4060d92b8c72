#pragma once
// A stand-in for the busiest rank of an expert-parallel group of `size`, in
// one process, for timing a rank's share of a mixture-of-experts step
// (`plan --config`'s probe): a model built with it holds rank `rank`'s
// experts (E / size of them), and every peer is taken to route its tokens
// as this rank routes its own. Each exchange then delivers to it, from every
// source, what this rank sends to the rank its tokens load most: the rows
// the busiest expert rank of the job receives when every rank's routing
// looks like this one's (with balanced routing, the rank's own N k rows in
// all; with the job's router, the imbalance it has). Its experts compute
// those rows, so the probe's compute and activations are the busiest
// rank's. The numbers are not a real job's: returned rows for the other
// ranks are copies of its own. Given a backend, the rows are copied there
// (a probe on a device); else on the host.
//
//   counts all-to-all   recv[s] = send[busiest] for every source s
//   rows all-to-all_v   recv segment s = the largest send segment (the
//                       busiest rank's rows, as the counts said), cut or
//                       repeated to recv_counts[s]
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/nn/moe/expert_parallel.hpp"

namespace meshtrain::parallel {

class MirroredExpertGroup final : public nn::ExpertParallelComm {
 public:
  MirroredExpertGroup(int rank, int size, kernels::Backend* backend = nullptr)
      : rank_(rank), size_(size), backend_(backend) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_to_all_v(const float* send, std::span<const size_t> send_counts, float* recv,
                    std::span<const size_t> recv_counts) override {
    size_t from = 0, largest = 0, at = 0;
    for (size_t d = 0; d < send_counts.size(); ++d) {
      if (send_counts[d] > largest) from = at, largest = send_counts[d];
      at += send_counts[d];
    }
    for (size_t n : recv_counts) {
      if (largest == 0) zero(recv, n);
      for (size_t done = 0; largest > 0 && done < n; done += largest)
        copy(recv + done, send + from, std::min(largest, n - done));
      recv += n;
    }
  }

  void all_to_all(const int64_t* send, int64_t* recv, size_t per_rank) override {
    size_t busiest = 0;
    int64_t most = -1;
    for (size_t d = 0; d < size_t(size_); ++d) {
      int64_t total = 0;
      for (size_t i = 0; i < per_rank; ++i) total += send[d * per_rank + i];
      if (total > most) busiest = d, most = total;
    }
    for (size_t s = 0; s < size_t(size_); ++s) std::copy_n(send + busiest * per_rank, per_rank, recv + s * per_rank);
  }

 private:
  void copy(float* dst, const float* src, size_t n) {
    if (backend_)
      backend_->copy(dst, src, n);
    else
      std::copy_n(src, n, dst);
  }
  void zero(float* dst, size_t n) {
    if (backend_)
      backend_->fill(dst, n, 0.0f);
    else
      std::fill_n(dst, n, 0.0f);
  }

  int rank_, size_;
  kernels::Backend* backend_;
};

}  // namespace meshtrain::parallel
