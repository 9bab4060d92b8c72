#pragma once
// Byte-level BPE: a vocabulary of token texts (GPT-2's byte-to-unicode
// spelling, data/bpe/byte_unicode.hpp) and merges by rank. One
// pre-tokenized piece encodes as its bytes, one token each, merged pairwise:
// always the adjacent pair whose merge has the lowest rank, the leftmost of
// equal ones, until no adjacent pair has a merge. This is Hugging Face's
// BPE::merge_word (and GPT-2's bpe()) step for step.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace meshtrain::bpe {

struct BpeOptions {
  // A piece that is a token of its own is that token, merges or not
  // (tokenizers' ignore_merges, as Llama 3's tokenizer sets).
  bool ignore_merges = false;
  // Bytes whose token is missing: the unknown token (fused into one per run
  // with fuse_unk), or dropped without one (as Hugging Face does).
  std::optional<int32_t> unk_id;
  bool fuse_unk = false;
};

class BpeModel {
 public:
  // vocab: (token text, id); merges: (left text, right text) by rank, both
  // sides and their concatenation in the vocabulary. DataError naming the
  // first bad entry: a negative or repeated id, a repeated text, a merge
  // whose parts or result are not tokens.
  BpeModel(const std::vector<std::pair<std::string, int32_t>>& vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options = {});

  // Appends the ids of one piece (raw bytes) to out.
  void encode_piece(std::string_view raw, std::vector<int32_t>& out) const;

  // max id + 1.
  int64_t vocab_size() const { return static_cast<int64_t>(id_to_text_.size()); }
  // The text of id; nullptr for an id outside the vocabulary.
  const std::string* token_text(int32_t id) const;
  std::optional<int32_t> token_id(std::string_view text) const;
  // Merges, by rank, as (left id, right id).
  const std::vector<std::pair<int32_t, int32_t>>& merges() const { return merge_pairs_; }
  const BpeOptions& options() const { return options_; }

  // Pieces already encoded, and their ids: one per thread, as pieces repeat
  // (a text of 4.4 MB has ~800k words, ~30k of them different).
  class Cache {
   public:
    // Ids of the piece, encoded once and then remembered (up to max_entries pieces).
    void encode(const BpeModel& model, std::string_view raw, std::vector<int32_t>& out);
    size_t size() const { return index_.size(); }
    static constexpr size_t kMaxEntries = 1 << 20;

   private:
    struct Hash {
      using is_transparent = void;
      size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, Hash, std::equal_to<>> index_;  // (first, count)
    std::vector<int32_t> ids_;
    std::vector<int32_t> scratch_;
  };

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  const Merge* find_merge(int32_t a, int32_t b) const;

  BpeOptions options_;
  struct TextHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int32_t, TextHash, std::equal_to<>> text_to_id_;
  std::vector<std::string> id_to_text_;
  std::vector<bool> has_id_;
  std::array<int32_t, 256> byte_id_{};  // the one-byte token of each byte; -1: none
  std::unordered_map<uint64_t, Merge> merge_of_;
  std::vector<std::pair<int32_t, int32_t>> merge_pairs_;
};

}  // namespace meshtrain::bpe
