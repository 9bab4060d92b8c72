#pragma once
// Reading and writing tokenizers in Hugging Face's files.
//
// Read: a tokenizer.json (model.type "BPE" with vocab and merges, merges as
// "a b" strings or ["a", "b"] pairs; pre_tokenizer ByteLevel; no normalizer;
// post_processor and decoder absent or ByteLevel; added_tokens without
// single_word), or GPT-2's vocab.json with merges.txt beside it, read as
// GPT-2 does (ByteLevel without a prefix space, no added tokens). Anything
// else is a DataError naming the file and the part, never a tokenizer that
// would silently encode differently from Hugging Face's.
//
// Written: tokenizer.json as `tokenizers` saves a ByteLevelBPETokenizer.
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "meshtrain/data/bpe/bpe_tokenizer.hpp"

namespace meshtrain::bpe {

// path: a tokenizer.json; a vocab.json (merges.txt from the same
// directory); or a directory holding tokenizer.json, else vocab.json and
// merges.txt.
BpeTokenizer load_tokenizer(const std::filesystem::path& path);

// What a byte-level BPE tokenizer.json holds: tokens by id, merges by rank,
// the added (special) tokens, the pre-tokenizer's prefix space.
struct TokenizerSpec {
  std::vector<std::string> vocab;                          // token text by id
  std::vector<std::pair<std::string, std::string>> merges;  // by rank
  std::vector<AddedToken> added;
  bool add_prefix_space = false;
};

// The tokenizer.json text of spec (pretty-printed, two spaces).
std::string tokenizer_json(const TokenizerSpec& spec);
// Writes it to path; IoError when that fails.
void save_tokenizer_json(const std::filesystem::path& path, const TokenizerSpec& spec);

}  // namespace meshtrain::bpe
