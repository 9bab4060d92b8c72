#pragma once
// Which data a job trains on, and the factory that loads it.
#include <cstdint>
#include <memory>
#include <string>

#include "meshtrain/data/dataset.hpp"
#include "meshtrain/data/sampler.hpp"

namespace meshtrain {

// Written by scripts/prepare-data.sh; relative to the working directory.
inline constexpr const char* kDefaultTextPath = "data/kjv.txt";

struct DataConfig {
  DataKind kind = DataKind::Text;
  // Empty: the default for the kind (kDefaultTextPath, or Debian's
  // /usr/share/datasets/fashion-mnist). For fashion_mnist, a directory.
  // Not read for tokens.
  std::string path{};
  // text: the last val_fraction of the file is the validation split; tokens
  // without val_path: the last val_fraction of train_path's tokens.
  // Fashion-MNIST has its own 10k test file for that.
  double val_fraction = 0.1;
  uint64_t seed = 0;  // shuffles the training order (data/sampler.hpp)
  // tokens: the .bin files (data/tokens/token_file.hpp); val_path empty:
  // split train_path by val_fraction.
  std::string train_path{};
  std::string val_path{};
  // tokens: every id must be below it (the model's vocabulary); 0: unchecked.
  int64_t vocab_size = 0;
  SampleOrder order = SampleOrder::Random;
  // tokens: the tokenizer that made the files (data/bpe/tokenizer_json.hpp);
  // empty: none known. Read by text_codec.hpp, not by the data set.
  std::string tokenizer{};
};

// Loads the data set. seq_len (T) is used by token data only. ConfigError for
// bad numbers, DataError for a missing or malformed file.
std::shared_ptr<const Dataset> make_dataset(const DataConfig& config, int64_t seq_len);

}  // namespace meshtrain
