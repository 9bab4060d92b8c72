#include "meshtrain/data/text_codec.hpp"

#include "meshtrain/core/error.hpp"
#include "meshtrain/data/bpe/tokenizer_json.hpp"
#include "meshtrain/data/tokenizer.hpp"

namespace meshtrain {

std::vector<int32_t> ByteCodec::encode(std::string_view text) const { return ByteTokenizer::encode(text); }
std::string ByteCodec::decode(std::span<const int32_t> tokens) const { return ByteTokenizer::decode(tokens); }
int64_t ByteCodec::vocab_size() const { return ByteTokenizer::kVocabSize; }

std::unique_ptr<const TextCodec> make_text_codec(const DataConfig& config, const std::string& tokenizer_path) {
  // data.tokenizer belongs to token data; text is bytes whatever it says.
  const std::string& path =
      !tokenizer_path.empty() ? tokenizer_path : config.kind == DataKind::Tokens ? config.tokenizer : tokenizer_path;
  if (!path.empty()) return std::make_unique<bpe::BpeTokenizer>(bpe::load_tokenizer(path));
  if (config.kind == DataKind::Tokens)
    throw ConfigError("this run trained on token files (data.kind = \"tokens\") without data.tokenizer: name the "
                      "tokenizer that made them (--tokenizer FILE, or data.tokenizer in the config)");
  return std::make_unique<ByteCodec>();
}

}  // namespace meshtrain
