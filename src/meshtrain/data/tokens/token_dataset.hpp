#pragma once
// A token data set from token files (data/tokens/token_file.hpp): a train
// file and a validation file, or one file split by val_fraction. Samples are
// windows of T+1 tokens at stride T within each split
// (data/token_windows.hpp), so sample i of a split starts at token i*T.
#include <cstdint>
#include <memory>
#include <string>

#include "meshtrain/data/dataset.hpp"
#include "meshtrain/data/tokens/token_file.hpp"

namespace meshtrain {

struct TokenDatasetOptions {
  std::string train_path{};
  std::string val_path{};  // empty: the last val_fraction of train_path's tokens
  int64_t seq_len = 0;   // T
  int64_t vocab_size = 0;  // every token must lie below it; 0: unchecked
  double val_fraction = 0.1;
};

class TokenDataset final : public Dataset {
 public:
  // Maps the files and checks every token against vocab_size. ConfigError for
  // seq_len < 1, an empty train_path or (without val_path) val_fraction
  // outside (0, 1); DataError naming the file for a missing or malformed file,
  // a token >= vocab_size, or a split too short for one window.
  explicit TokenDataset(const TokenDatasetOptions& options);

  DataKind kind() const override { return DataKind::Tokens; }
  int64_t num_samples(Split split) const override;
  int64_t num_classes() const override { return vocab_size_; }
  int64_t seq_len() const override { return seq_len_; }
  int64_t image_h() const override { return 0; }
  int64_t image_w() const override { return 0; }
  void fill_batch(Split split, std::span<const int64_t> indices, Batch& batch) const override;

  // The tokens of a split, before cutting into windows.
  std::span<const uint16_t> split_tokens(Split split) const;
  const MappedTokenFile& train_file() const { return *train_; }

 private:
  int64_t seq_len_;
  int64_t vocab_size_;
  std::unique_ptr<MappedTokenFile> train_, val_;  // val_ null: split off train_
  std::span<const uint16_t> splits_[2];           // train, validation
};

}  // namespace meshtrain
