#include "meshtrain/data/loader.hpp"

#include <utility>

#include "meshtrain/core/error.hpp"

namespace meshtrain {

// Checked before the samplers are built from it, so a null pointer gets its own message.
static const Dataset& require(const std::shared_ptr<const Dataset>& dataset) {
  if (!dataset) throw ConfigError("DataLoader: no data set given");
  return *dataset;
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, int64_t batch_size, int rank,
                       int world_size, uint64_t seed, SampleOrder order)
    : dataset_(std::move(dataset)),
      sampler_(require(dataset_).num_samples(Split::Train), batch_size, rank, world_size, seed, order),
      val_sampler_(dataset_->num_samples(Split::Validation), batch_size, rank, world_size) {}

DataLoader DataLoader::from_config(const DataConfig& config, int64_t seq_len, int64_t batch_size,
                                   int rank, int world_size) {
  return DataLoader(make_dataset(config, seq_len), batch_size, rank, world_size, config.seed, config.order);
}

void DataLoader::next_batch(Batch& batch) {
  dataset_->fill_batch(Split::Train, sampler_.next(), batch);
}

void DataLoader::validation_batch(int64_t k, Batch& batch) {
  dataset_->fill_batch(Split::Validation, val_sampler_.batch(k), batch);
}

}  // namespace meshtrain
