#pragma once
// Which data a job trains on, and the factory that loads it.
#include <cstdint>
#include <memory>
#include <string>

#include "meshtrain/data/dataset.hpp"

namespace meshtrain {

// Written by scripts/prepare-data.sh; relative to the working directory.
inline constexpr const char* kDefaultTextPath = "data/kjv.txt";

struct DataConfig {
  DataKind kind = DataKind::Text;
  // Empty: the default for the kind (kDefaultTextPath, or Debian's
  // /usr/share/datasets/fashion-mnist). For fashion_mnist, a directory.
  std::string path;
  // text only: the last val_fraction of the file is the validation split.
  // Fashion-MNIST has its own 10k test file for that.
  double val_fraction = 0.1;
  uint64_t seed = 0;  // shuffles the training order (data/sampler.hpp)
};

// Loads the data set. seq_len (T) is used by token data only. ConfigError for
// bad numbers, DataError for a missing or malformed file.
std::shared_ptr<const Dataset> make_dataset(const DataConfig& config, int64_t seq_len);

}  // namespace meshtrain
