#include "meshtrain/data/sampler.hpp"

#include <numeric>
#include <string>
#include <utility>

#include "meshtrain/core/error.hpp"
#include "meshtrain/core/rng.hpp"

namespace meshtrain {

DistributedSampler::DistributedSampler(int64_t num_samples, int64_t batch_size, int rank,
                                       int world_size, uint64_t seed, SampleOrder order)
    : num_samples_(num_samples), batch_size_(batch_size), rank_(rank), seed_(seed), order_(order) {
  if (batch_size < 1)
    throw ConfigError("sampler: batch size must be at least 1, got " + std::to_string(batch_size));
  if (world_size < 1)
    throw ConfigError("sampler: world size must be at least 1, got " + std::to_string(world_size));
  if (rank < 0 || rank >= world_size)
    throw ConfigError("sampler: rank " + std::to_string(rank) + " is outside [0, " +
                      std::to_string(world_size) + ")");
  global_batch_ = batch_size * world_size;
  if (global_batch_ > num_samples)
    throw ConfigError("sampler: the global batch (world size " + std::to_string(world_size) +
                      " x batch size " + std::to_string(batch_size) + " = " +
                      std::to_string(global_batch_) + ") exceeds the split's " +
                      std::to_string(num_samples) + " samples");
}

void DistributedSampler::permutation(int64_t num_samples, uint64_t seed, int64_t epoch,
                                     std::vector<int64_t>& out, SampleOrder order) {
  out.resize(static_cast<size_t>(num_samples));
  std::iota(out.begin(), out.end(), int64_t{0});
  if (order == SampleOrder::Sequential) return;
  // Fisher-Yates, back to front: slot i receives a uniform pick among [0, i].
  Rng rng = Rng::derive(seed, static_cast<uint64_t>(epoch));
  for (int64_t i = num_samples - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i) + 1));
    std::swap(out[i], out[j]);
  }
}

std::span<const int64_t> DistributedSampler::next() {
  // Roll over lazily, at the start of a step rather than the end of the last
  // one: a state saved at the end of an epoch then still says how many samples
  // were left, which a resume with a smaller global batch can use.
  if (state_.position + global_batch_ > num_samples_) {
    ++state_.epoch;
    state_.position = 0;
  }
  if (perm_epoch_ != state_.epoch) {
    permutation(num_samples_, seed_, state_.epoch, perm_, order_);
    perm_epoch_ = state_.epoch;
  }
  const int64_t start = state_.position + rank_ * batch_size_;
  state_.position += global_batch_;
  return {perm_.data() + start, static_cast<size_t>(batch_size_)};
}

void DistributedSampler::restore(const SamplerState& state) {
  if (state.epoch < 0 || state.position < 0 || state.position > num_samples_)
    throw ConfigError("sampler: cannot restore epoch " + std::to_string(state.epoch) +
                      ", position " + std::to_string(state.position) + " in a split of " +
                      std::to_string(num_samples_) + " samples (was it saved for other data?)");
  state_ = state;
}

SequentialSampler::SequentialSampler(int64_t num_samples, int64_t batch_size, int rank, int world_size)
    : num_samples_(num_samples), batch_size_(batch_size), rank_(rank), world_size_(world_size) {
  if (batch_size < 1)
    throw ConfigError("validation sampler: batch size must be at least 1, got " +
                      std::to_string(batch_size));
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw ConfigError("validation sampler: rank " + std::to_string(rank) + " is outside a world of " +
                      std::to_string(world_size));
  indices_.resize(static_cast<size_t>(batch_size));
}

std::span<const int64_t> SequentialSampler::batch(int64_t k) {
  if (k < 0 || k >= num_batches())
    throw ConfigError("validation sampler: batch " + std::to_string(k) + " is outside [0, " +
                      std::to_string(num_batches()) + ") (" + std::to_string(num_samples_) +
                      " samples, batch size " + std::to_string(batch_size_) + ")");
  std::iota(indices_.begin(), indices_.end(), (k * world_size_ + rank_) * batch_size_);
  return indices_;
}

}  // namespace meshtrain
