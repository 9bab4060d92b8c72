#pragma once
// Byte-level tokenizer: every byte is its own token, so the vocabulary is 256,
// any file is valid input and decode(encode(s)) == s exactly. Chosen over BPE
// because it needs no trained merge table and keeps the data layer trivial.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace meshtrain {

class ByteTokenizer {
 public:
  static constexpr int64_t kVocabSize = 256;

  // Token ids in [0, 256), one per byte of text.
  static std::vector<int32_t> encode(std::string_view text);
  // Inverse of encode. A token outside [0, 256) throws DataError.
  static std::string decode(std::span<const int32_t> tokens);
};

}  // namespace meshtrain
