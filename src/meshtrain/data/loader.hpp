#pragma once
// A data set plus this rank's sample order: what the training loop pulls
// batches from. Training batches follow DistributedSampler (shuffled or in
// file order, a slice of the global batch per rank, resumable); validation batches follow
// SequentialSampler (in order, a slice of the global batch per rank).
#include <cstdint>
#include <memory>

#include "meshtrain/core/batch.hpp"
#include "meshtrain/data/data_config.hpp"
#include "meshtrain/data/dataset.hpp"
#include "meshtrain/data/sampler.hpp"

namespace meshtrain {

class DataLoader {
 public:
  // batch_size is B, per rank. ConfigError if the train split has fewer than
  // world_size * B samples. The validation split may hold fewer than world_size * B: it then
  // has no batches (num_validation_batches() == 0).
  DataLoader(std::shared_ptr<const Dataset> dataset, int64_t batch_size, int rank,
             int world_size, uint64_t seed, SampleOrder order = SampleOrder::Random);
  // make_dataset(config, seq_len), then the constructor above with config.seed and config.order.
  static DataLoader from_config(const DataConfig& config, int64_t seq_len, int64_t batch_size,
                                int rank, int world_size);

  // Fills batch with this rank's part of the next global training batch.
  // Reuses batch's buffers: no allocation after the first call.
  void next_batch(Batch& batch);

  int64_t num_validation_batches() const { return val_sampler_.num_batches(); }
  // Fills batch with this rank's part of validation batch k in [0, num_validation_batches()).
  void validation_batch(int64_t k, Batch& batch);

  // Where training stands; saved in checkpoints. Does not depend on the world
  // size, so restore() accepts a state saved by a run with another one.
  SamplerState state() const { return sampler_.state(); }
  void restore(const SamplerState& state) { sampler_.restore(state); }

  const Dataset& dataset() const { return *dataset_; }
  const DistributedSampler& sampler() const { return sampler_; }

 private:
  std::shared_ptr<const Dataset> dataset_;
  DistributedSampler sampler_;
  SequentialSampler val_sampler_;
};

}  // namespace meshtrain
