#pragma once
// A token data set from any file, tokenized by bytes (data/tokenizer.hpp).
//
// Terms: the file's n bytes are the stream. The last val_fraction of it is the
// validation split, the rest the train split. Samples are windows of T+1
// tokens at stride T within a split (data/token_windows.hpp).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "meshtrain/data/dataset.hpp"

namespace meshtrain {

class TextDataset final : public Dataset {
 public:
  // Reads the whole file once. Throws ConfigError for seq_len < 1 or
  // val_fraction outside (0, 1); DataError (naming the path) for a missing or
  // unreadable file, or one too short for one window in either split.
  TextDataset(const std::filesystem::path& path, int64_t seq_len, double val_fraction);

  DataKind kind() const override { return DataKind::Text; }
  int64_t num_samples(Split split) const override;
  int64_t num_classes() const override;
  int64_t seq_len() const override { return seq_len_; }
  int64_t image_h() const override { return 0; }
  int64_t image_w() const override { return 0; }
  void fill_batch(Split split, std::span<const int64_t> indices, Batch& batch) const override;

  const std::filesystem::path& path() const { return path_; }
  // Bytes in each split, before cutting into windows.
  int64_t split_bytes(Split split) const;

 private:
  std::filesystem::path path_;
  int64_t seq_len_;                // T
  std::vector<unsigned char> bytes_;  // the whole file
  int64_t val_start_ = 0;          // first byte of the validation split
};

// The whole file as bytes. DataError naming the path if it is missing, a
// directory, or cannot be read.
std::vector<unsigned char> read_file_bytes(const std::filesystem::path& path);

}  // namespace meshtrain
