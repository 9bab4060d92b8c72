#pragma once
// Token files: the training data nanoGPT's and llm.c's preparation scripts
// write, one stream of GPT-2-sized token ids per file.
//
//   nanogpt  the raw tokens, little-endian uint16, nothing else
//            (nanoGPT's data/*/prepare.py: np.array(ids, dtype=np.uint16).tofile(...))
//   llmc     a header of 256 little-endian int32 (1024 bytes): magic 20240520,
//            version 1, the token count, zeros; then the tokens as uint16
//            (llm.c's dev/data/data_common.py write_datafile)
//
// A file is read as llm.c's when its first int32 is the magic, otherwise as
// nanoGPT's: a raw file whose first two tokens are 55240, 308 (the magic's
// halves) cannot be told apart and is refused with the llm.c messages.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "meshtrain/core/enum_names.hpp"

namespace meshtrain {

enum class TokenFileFormat { NanoGpt, Llmc };
inline constexpr EnumName<TokenFileFormat> kTokenFileFormatNames[] = {{TokenFileFormat::NanoGpt, "nanogpt"},
                                                                      {TokenFileFormat::Llmc, "llmc"}};
constexpr std::span<const EnumName<TokenFileFormat>> enum_names(TokenFileFormat) { return kTokenFileFormatNames; }

inline constexpr int32_t kLlmcMagic = 20240520;
inline constexpr int32_t kLlmcVersion = 1;            // uint16 tokens
inline constexpr int32_t kLlmcLlama3Magic = 20240801;  // version 7, uint32 tokens: not read
inline constexpr size_t kLlmcHeaderInts = 256;
inline constexpr size_t kLlmcHeaderBytes = kLlmcHeaderInts * sizeof(int32_t);
// Both formats store uint16: ids must lie below this.
inline constexpr int64_t kTokenFileIdLimit = 65536;

struct TokenFileLayout {
  TokenFileFormat format = TokenFileFormat::NanoGpt;
  size_t header_bytes = 0;  // 0 or kLlmcHeaderBytes
  int64_t tokens = 0;
};

// The layout of a file of file_size bytes whose first bytes are `head` (at
// least min(file_size, kLlmcHeaderBytes) of them). DataError naming `name`
// (the path) for: an llm.c header that is cut short, has another version, or
// a token count that does not match the size; llm.c's Llama 3 magic; a header
// that looks like llm.c's (version 1, a count that matches the size) under
// another magic; a raw file with an odd number of bytes.
TokenFileLayout parse_token_file_layout(std::span<const std::byte> head, uint64_t file_size, const std::string& name);

// A token file mapped read-only into memory: pages are read as windows touch
// them, and processes on one host share them through the page cache.
class MappedTokenFile {
 public:
  // DataError naming the path for a missing, unreadable or malformed file
  // (parse_token_file_layout).
  explicit MappedTokenFile(const std::filesystem::path& path);
  ~MappedTokenFile();
  MappedTokenFile(const MappedTokenFile&) = delete;
  MappedTokenFile& operator=(const MappedTokenFile&) = delete;

  std::span<const uint16_t> tokens() const { return tokens_; }
  TokenFileFormat format() const { return layout_.format; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  TokenFileLayout layout_;
  void* map_ = nullptr;  // null for an empty file
  size_t map_bytes_ = 0;
  std::span<const uint16_t> tokens_;
};

// DataError naming `name` when a token is not below vocab_size: the first
// such token and its position. vocab_size 0: no check.
void check_token_ids(std::span<const uint16_t> tokens, int64_t vocab_size, const std::string& name);

// Writes tokens to path in `format`, through a temporary file renamed into
// place. DataError for an id outside [0, 65536); IoError when writing fails.
void write_token_file(const std::filesystem::path& path, std::span<const int32_t> tokens, TokenFileFormat format);

}  // namespace meshtrain
