#pragma once
// Learning a byte-level BPE from a corpus: the standard algorithm, as
// Hugging Face's BpeTrainer runs it for a ByteLevelBPETokenizer.
//
// Terms. The corpus is read line by line (each line with its newline, as
// `tokenizers` reads training files); each line is cut into pieces by GPT-2's
// regex, and a word is a distinct piece with its count. Ids: the special
// tokens first, then the 256 bytes ordered by the code point of their GPT-2
// character (data/bpe/byte_unicode.hpp: '!' is 0, 'Ġ', the space, is 220),
// then each merged token as it is made. A pair is two adjacent tokens of a
// word; its count is the sum of the counts of the words it occurs in, once
// per occurrence. Each step merges the pair with the highest count; among
// equal counts, the smallest (left id, right id), left ids compared first.
// The merge is applied in every word left to right (in "aaa", (a, a) becomes
// "aa a"), and the counts of the pairs around it are updated. Training stops
// at vocab_size tokens, or when no pair occurs min_frequency times (or at
// all). Being the same rules with the same ids, it learns the same merges as
// `tokenizers`.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "meshtrain/core/function_ref.hpp"
#include "meshtrain/data/bpe/tokenizer_json.hpp"

namespace meshtrain::bpe {

struct BpeTrainerOptions {
  int64_t vocab_size = 0;    // special tokens + 256 bytes + merges
  int64_t min_frequency = 0;  // a pair needs this count to be merged
  std::vector<std::string> special_tokens;
  int threads = 0;  // counting words; 0: OpenMP's default
};

enum class TrainPhase { CountWords, Merge };

// ConfigError for a vocab_size below the special tokens + 256 bytes.
// progress(phase, done, total): bytes of the corpus counted, then merges made
// of the vocab_size - (special tokens + 256) wanted.
TokenizerSpec train_bpe(std::string_view corpus, const BpeTrainerOptions& options,
                        FunctionRef<void(TrainPhase, size_t, size_t)> progress);

}  // namespace meshtrain::bpe
