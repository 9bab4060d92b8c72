#include "meshtrain/data/tokenizer.hpp"

#include "meshtrain/core/error.hpp"

namespace meshtrain {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) {
  std::vector<int32_t> tokens(text.size());
  // Through unsigned char: a plain char may be signed, and bytes >= 0x80 must
  // map to 128..255, not to negative ids.
  for (size_t i = 0; i < text.size(); ++i) tokens[i] = static_cast<unsigned char>(text[i]);
  return tokens;
}

std::string ByteTokenizer::decode(std::span<const int32_t> tokens) {
  std::string text(tokens.size(), '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    if (t < 0 || t >= kVocabSize)
      throw DataError("ByteTokenizer::decode: token " + std::to_string(t) + " at position " +
                      std::to_string(i) + " is outside the byte vocabulary [0, 256)");
    text[i] = static_cast<char>(static_cast<unsigned char>(t));
  }
  return text;
}

}  // namespace meshtrain
