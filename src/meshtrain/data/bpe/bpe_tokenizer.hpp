#pragma once
// A byte-level BPE tokenizer as Hugging Face's `tokenizers` runs one with a
// ByteLevel pre-tokenizer (GPT-2's): added tokens are cut out of the text
// first (leftmost, then longest); each stretch between them gets a leading
// space where add_prefix_space asks for one and none is there, is cut into
// pieces by GPT-2's regex (data/bpe/pretokenizer.hpp), and each piece's
// bytes are merged by the BPE model (data/bpe/bpe_model.hpp).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "meshtrain/core/function_ref.hpp"
#include "meshtrain/data/bpe/bpe_model.hpp"
#include "meshtrain/data/bpe/pretokenizer.hpp"
#include "meshtrain/data/text_codec.hpp"

namespace meshtrain::bpe {

// A token matched in the raw text before pre-tokenization (tokenizer.json's
// added_tokens), such as GPT-2's "<|endoftext|>".
struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = true;
  bool lstrip = false;  // the match takes the white space before it
  bool rstrip = false;  // and after it
};

struct PreTokenizerOptions {
  bool add_prefix_space = false;
  bool use_regex = true;  // false: each stretch is one piece
};

class BpeTokenizer final : public TextCodec {
 public:
  BpeTokenizer(BpeModel model, std::vector<AddedToken> added, PreTokenizerOptions pre);

  std::vector<int32_t> encode(std::string_view text) const override;
  // The same on `threads` threads (0: OpenMP's default): a stretch is cut at
  // newlines where no piece can cross (after a printable ASCII byte, before
  // another), so the ids are those of one thread. progress(bytes done,
  // bytes in all) is called now and then from one thread at a time.
  std::vector<int32_t> encode(std::string_view text, int threads,
                              FunctionRef<void(size_t, size_t)> progress) const;
  // Each token's bytes: an added token's content; a model token's text
  // mapped back through bytes_to_unicode (its UTF-8 as it is where a
  // character is outside the table, as Hugging Face's ByteLevel decoder does).
  std::string decode(std::span<const int32_t> tokens) const override;
  // Model and added tokens: the largest id + 1.
  int64_t vocab_size() const override;

  const BpeModel& model() const { return model_; }
  const std::vector<AddedToken>& added_tokens() const { return added_; }
  const PreTokenizerOptions& pre_tokenizer() const { return pre_; }

 private:
  struct Segment {
    size_t begin, end;  // bytes of the text
    int32_t added_id;   // -1: ordinary text, else the added token it is
  };
  std::vector<Segment> split_added(std::string_view text) const;
  // Encodes part of a stretch of ordinary text; prefix: it starts the
  // stretch and add_prefix_space applies.
  void encode_chunk(std::string_view text, bool prefix, Pretokenizer::Scratch& scratch, BpeModel::Cache& cache,
                    std::vector<int32_t>& out) const;

  BpeModel model_;
  std::vector<AddedToken> added_;
  PreTokenizerOptions pre_;
  std::unique_ptr<Pretokenizer> regex_;
};

}  // namespace meshtrain::bpe
