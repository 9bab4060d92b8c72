#pragma once
// Text to token ids and back: the bytes of data.kind = "text"
// (data/tokenizer.hpp) or the BPE tokenizer that made a run's token files
// (data/bpe/bpe_tokenizer.hpp). What `meshtrain generate` encodes its prompt
// and decodes its samples with.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "meshtrain/data/data_config.hpp"

namespace meshtrain {

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // The bytes the tokens stand for (not necessarily UTF-8 where a sample
  // stops inside a character). DataError for an id outside the vocabulary.
  virtual std::string decode(std::span<const int32_t> tokens) const = 0;
  // Ids lie in [0, vocab_size()).
  virtual int64_t vocab_size() const = 0;
};

// One token per byte.
class ByteCodec final : public TextCodec {
 public:
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> tokens) const override;
  int64_t vocab_size() const override;
};

// The codec of a job's data: the tokenizer at tokenizer_path when given;
// else bytes for text, and for tokens the tokenizer config.tokenizer names
// (ConfigError when it is empty: token files do not say how they were made).
std::unique_ptr<const TextCodec> make_text_codec(const DataConfig& config, const std::string& tokenizer_path = "");

}  // namespace meshtrain
