#pragma once
// Sample order for training (shuffled or in file order, rank-aware,
// resumable) and for validation (in order, the same on every rank).
//
// Terms. N samples in the split; n ranks (world size: the data-parallel
// ranks; tensor and pipeline ranks of one data rank share its batch); B
// samples per rank per step; G = n*B the global batch. Each epoch e has its
// own permutation of [0, N): a Fisher-Yates shuffle driven by
// Rng::derive(seed, e) for order Random, the identity for order Sequential
// (so global step s of an epoch takes samples [s*G, (s+1)*G) and rank r
// samples [s*G + r*B, s*G + (r+1)*B), whatever the seed). The position
// p counts how many samples of that permutation the whole job (all ranks
// together) has consumed. A step takes the global batch perm[p, p+G), rank r
// takes its slice perm[p + r*B, p + (r+1)*B), and p advances by G. When fewer
// than G samples remain, they are dropped and the next epoch starts at p = 0.
//
// So n ranks with batch B see, together, exactly the samples one process with
// batch n*B sees, and the state (epoch, p) does not depend on n: a run saved
// with 4 ranks can resume with 2 and continue the same permutation from p,
// repeating and skipping nothing within the epoch.
#include <cstdint>
#include <span>
#include <vector>

#include "meshtrain/core/enum_names.hpp"

namespace meshtrain {

// data.order: the training permutation of each epoch.
enum class SampleOrder { Random, Sequential };
inline constexpr EnumName<SampleOrder> kSampleOrderNames[] = {{SampleOrder::Random, "random"},
                                                              {SampleOrder::Sequential, "sequential"}};
constexpr std::span<const EnumName<SampleOrder>> enum_names(SampleOrder) { return kSampleOrderNames; }

struct SamplerState {
  int64_t epoch = 0;     // which permutation
  int64_t position = 0;  // samples of this epoch's permutation consumed by all ranks together
  bool operator==(const SamplerState&) const = default;
};

class DistributedSampler {
 public:
  // ConfigError for B < 1, world_size < 1, rank outside [0, world_size), or a
  // global batch n*B larger than the N samples (no step could ever be taken).
  DistributedSampler(int64_t num_samples, int64_t batch_size, int rank, int world_size,
                     uint64_t seed, SampleOrder order = SampleOrder::Random);

  // This rank's B indices of the next global batch; advances the state by one
  // global batch. The span points into the sampler and holds until the next
  // call. Allocates only when an epoch's permutation is first built.
  std::span<const int64_t> next();

  SamplerState state() const { return state_; }
  // ConfigError for a negative epoch or a position outside [0, N].
  void restore(const SamplerState& state);

  int64_t num_samples() const { return num_samples_; }
  int64_t batch_size() const { return batch_size_; }          // B
  int64_t global_batch_size() const { return global_batch_; }  // G = n*B
  // Steps in an epoch started at position 0: floor(N / G).
  int64_t steps_per_epoch() const { return num_samples_ / global_batch_; }

  // The permutation of [0, num_samples) for an epoch, as next() uses it.
  static void permutation(int64_t num_samples, uint64_t seed, int64_t epoch,
                          std::vector<int64_t>& out, SampleOrder order = SampleOrder::Random);

 private:
  int64_t num_samples_;   // N
  int64_t batch_size_;    // B
  int64_t global_batch_;  // G
  int rank_;
  uint64_t seed_;
  SampleOrder order_;
  SamplerState state_;
  std::vector<int64_t> perm_;  // the permutation of perm_epoch_
  int64_t perm_epoch_ = -1;    // -1: none built yet
};

// Validation order: global batch k is samples [k*n*B, (k+1)*n*B) in file
// order, and rank r evaluates its slice [k*n*B + r*B, k*n*B + (r+1)*B), so n
// ranks together evaluate exactly the batches one process with batch n*B
// does (the sums of their results are that process's). The incomplete last
// global batch is dropped.
class SequentialSampler {
 public:
  // ConfigError for B < 1, world_size < 1 or a rank outside [0, world_size).
  SequentialSampler(int64_t num_samples, int64_t batch_size, int rank = 0, int world_size = 1);

  int64_t num_batches() const { return num_samples_ / (batch_size_ * world_size_); }
  // This rank's indices of batch k; ConfigError if k is outside
  // [0, num_batches()). The span points into the sampler and holds until the
  // next call.
  std::span<const int64_t> batch(int64_t k);

 private:
  int64_t num_samples_;
  int64_t batch_size_;
  int rank_, world_size_;
  std::vector<int64_t> indices_;  // (B), reused
};

}  // namespace meshtrain
