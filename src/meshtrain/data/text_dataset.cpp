#include "meshtrain/data/text_dataset.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "meshtrain/core/error.hpp"
#include "meshtrain/data/token_windows.hpp"
#include "meshtrain/data/tokenizer.hpp"

namespace meshtrain {

namespace fs = std::filesystem;

std::vector<unsigned char> read_file_bytes(const fs::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status))
    throw DataError("data file " + path.string() + " does not exist");
  if (fs::is_directory(status))
    throw DataError("data file " + path.string() + " is a directory, not a file");

  // stdio rather than iostreams: errno then says why an open or read failed.
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file)
    throw DataError("data file " + path.string() + " cannot be opened: " + std::strerror(errno));
  std::vector<unsigned char> bytes;
  unsigned char chunk[1 << 16];
  size_t got;
  while ((got = std::fread(chunk, 1, sizeof chunk, file.get())) > 0)
    bytes.insert(bytes.end(), chunk, chunk + got);
  if (std::ferror(file.get()))
    throw DataError("data file " + path.string() + " cannot be read: " + std::strerror(errno));
  return bytes;
}

TextDataset::TextDataset(const fs::path& path, int64_t seq_len, double val_fraction)
    : path_(path), seq_len_(seq_len) {
  if (seq_len < 1)
    throw ConfigError("text data: seq_len must be at least 1, got " + std::to_string(seq_len));
  if (!(val_fraction > 0.0 && val_fraction < 1.0))
    throw ConfigError("text data: val_fraction must lie in (0, 1), got " +
                      std::to_string(val_fraction));
  bytes_ = read_file_bytes(path);

  const int64_t n = static_cast<int64_t>(bytes_.size());
  const int64_t val_bytes = static_cast<int64_t>(std::llround(static_cast<double>(n) * val_fraction));
  val_start_ = n - val_bytes;
  for (Split split : {Split::Train, Split::Validation}) {
    if (num_samples(split) == 0)
      throw DataError("data file " + path.string() + " is too short: its " +
                      std::string(split_name(split)) + " split has " +
                      std::to_string(split_bytes(split)) + " bytes (" + std::to_string(n) +
                      " in the file, val_fraction " + std::to_string(val_fraction) +
                      "), fewer than the seq_len + 1 = " + std::to_string(seq_len + 1) +
                      " one window needs");
  }
}

int64_t TextDataset::split_bytes(Split split) const {
  return split == Split::Train ? val_start_ : static_cast<int64_t>(bytes_.size()) - val_start_;
}

int64_t TextDataset::num_samples(Split split) const {
  return windows_in(split_bytes(split), seq_len_);
}

int64_t TextDataset::num_classes() const { return ByteTokenizer::kVocabSize; }

void TextDataset::fill_batch(Split split, std::span<const int64_t> indices, Batch& batch) const {
  const int64_t first = split == Split::Train ? 0 : val_start_;
  const std::span<const unsigned char> bytes(bytes_.data() + first, static_cast<size_t>(split_bytes(split)));
  fill_windows(bytes, seq_len_, indices, batch, "text data", split);
}

}  // namespace meshtrain
