#pragma once
// A stand-in for one rank of an expert-parallel group of `size`, with no
// peers: a model built with it has that rank's layout (its experts, by
// name). For reading a checkpoint saved at another expert split
// (train/loop/train_checkpoint.cpp); it cannot route tokens.
#include "meshtrain/core/error.hpp"
#include "meshtrain/nn/moe/expert_parallel.hpp"

namespace meshtrain::parallel {

class SoloExpertGroup final : public nn::ExpertParallelComm {
 public:
  SoloExpertGroup(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_to_all_v(const float*, std::span<const size_t>, float*, std::span<const size_t>) override { refuse(); }
  void all_to_all(const int64_t*, int64_t*, size_t) override { refuse(); }

 private:
  [[noreturn]] static void refuse() { throw Error("SoloExpertGroup is a layout only: it has no peers to route to"); }
  int rank_, size_;
};

}  // namespace meshtrain::parallel
