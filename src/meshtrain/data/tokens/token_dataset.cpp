#include "meshtrain/data/tokens/token_dataset.hpp"

#include <cmath>

#include "meshtrain/core/error.hpp"
#include "meshtrain/data/token_windows.hpp"

namespace meshtrain {

TokenDataset::TokenDataset(const TokenDatasetOptions& o) : seq_len_(o.seq_len), vocab_size_(o.vocab_size) {
  if (o.seq_len < 1) throw ConfigError("token data: seq_len must be at least 1, got " + std::to_string(o.seq_len));
  if (o.train_path.empty()) throw ConfigError("token data: data.train_path is empty");
  if (o.val_path.empty() && !(o.val_fraction > 0.0 && o.val_fraction < 1.0))
    throw ConfigError("token data: val_fraction must lie in (0, 1) to split " + o.train_path + ", got " +
                      std::to_string(o.val_fraction));
  train_ = std::make_unique<MappedTokenFile>(o.train_path);
  check_token_ids(train_->tokens(), o.vocab_size, o.train_path);
  std::span<const uint16_t> all = train_->tokens();
  if (o.val_path.empty()) {
    const auto n = static_cast<int64_t>(all.size());
    const auto val = static_cast<int64_t>(std::llround(static_cast<double>(n) * o.val_fraction));
    splits_[0] = all.first(static_cast<size_t>(n - val));
    splits_[1] = all.subspan(static_cast<size_t>(n - val));
  } else {
    val_ = std::make_unique<MappedTokenFile>(o.val_path);
    check_token_ids(val_->tokens(), o.vocab_size, o.val_path);
    splits_[0] = all;
    splits_[1] = val_->tokens();
  }
  for (Split split : {Split::Train, Split::Validation}) {
    if (num_samples(split) > 0) continue;
    const std::string& file = split == Split::Validation && val_ ? o.val_path : o.train_path;
    throw DataError("token file " + file + " is too short: its " + std::string(split_name(split)) +
                    " split has " + std::to_string(split_tokens(split).size()) + " tokens" +
                    (val_ ? "" : " (" + std::to_string(all.size()) + " in the file, val_fraction " +
                                     std::to_string(o.val_fraction) + ")") +
                    ", fewer than the seq_len + 1 = " + std::to_string(o.seq_len + 1) + " one window needs");
  }
}

std::span<const uint16_t> TokenDataset::split_tokens(Split split) const {
  return splits_[split == Split::Train ? 0 : 1];
}

int64_t TokenDataset::num_samples(Split split) const {
  return windows_in(static_cast<int64_t>(split_tokens(split).size()), seq_len_);
}

void TokenDataset::fill_batch(Split split, std::span<const int64_t> indices, Batch& batch) const {
  fill_windows(split_tokens(split), seq_len_, indices, batch, "token data", split);
}

}  // namespace meshtrain
