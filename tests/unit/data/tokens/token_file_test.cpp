#include "meshtrain/data/tokens/token_file.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "meshtrain/core/error.hpp"
#include "../test_files.hpp"

namespace meshtrain {
namespace {

using testing::TempDir;
using testing::write_bytes;
using Bytes = std::vector<uint8_t>;

// llm.c's file: 256 int32 header (magic, version, count), then uint16 tokens.
Bytes llmc_bytes(const std::vector<uint16_t>& tokens, int32_t magic = kLlmcMagic, int32_t version = 1,
                 int64_t count = -1) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic, header[1] = version, header[2] = static_cast<int32_t>(count < 0 ? tokens.size() : count);
  Bytes out(1024 + 2 * tokens.size());
  std::memcpy(out.data(), header.data(), 1024);
  if (!tokens.empty()) std::memcpy(out.data() + 1024, tokens.data(), 2 * tokens.size());
  return out;
}

Bytes raw_bytes(const std::vector<uint16_t>& tokens) {
  Bytes out(2 * tokens.size());
  if (!tokens.empty()) std::memcpy(out.data(), tokens.data(), out.size());
  return out;
}

TokenFileLayout layout(const Bytes& b) {
  return parse_token_file_layout(std::as_bytes(std::span(b)).first(std::min<size_t>(b.size(), 1024)), b.size(), "f.bin");
}

std::string error_of(const Bytes& b) {
  try {
    layout(b);
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no DataError)";
}

TEST(TokenFile, TellsTheFormatsApartByTheMagic) {
  const TokenFileLayout raw = layout(raw_bytes({1, 2, 3}));
  EXPECT_EQ(raw.format, TokenFileFormat::NanoGpt);
  EXPECT_EQ(raw.header_bytes, 0u);
  EXPECT_EQ(raw.tokens, 3);
  const TokenFileLayout llmc = layout(llmc_bytes({1, 2, 3, 4}));
  EXPECT_EQ(llmc.format, TokenFileFormat::Llmc);
  EXPECT_EQ(llmc.header_bytes, 1024u);
  EXPECT_EQ(llmc.tokens, 4);
  EXPECT_EQ(layout({}).tokens, 0);
  // A raw file of 600 tokens is longer than a header: still raw.
  EXPECT_EQ(layout(raw_bytes(std::vector<uint16_t>(600, 7))).format, TokenFileFormat::NanoGpt);
}

TEST(TokenFile, NamesTheFileAndTheProblem) {
  const auto has = [](const std::string& msg, const std::string& part) {
    EXPECT_NE(msg.find(part), std::string::npos) << msg;
    EXPECT_NE(msg.find("f.bin"), std::string::npos) << msg;
  };
  Bytes truncated = llmc_bytes({1, 2, 3, 4});
  truncated.resize(truncated.size() - 3);
  has(error_of(truncated), "llm.c header says 4 tokens (1032 bytes with the header), but the file has 1029 bytes (truncated?)");
  Bytes header_only = llmc_bytes({});
  header_only.resize(100);
  has(error_of(header_only), "llm.c header is truncated");
  has(error_of(llmc_bytes({1, 2}, kLlmcMagic, 2)), "llm.c version 2 is not supported");
  has(error_of(llmc_bytes({1, 2}, kLlmcMagic, 1, 5)), "llm.c header says 5 tokens");
  has(error_of(llmc_bytes({1, 2}, 20240521)), "wrong magic 20240521");
  has(error_of(llmc_bytes({1, 2}, kLlmcLlama3Magic, 7)), "Llama 3");
  has(error_of(Bytes{1, 2, 3}), "odd number of bytes (3)");
}

TEST(TokenFile, WritesAndMapsBothFormats) {
  TempDir dir;
  const std::vector<int32_t> ids = {0, 1, 50256, 65535, 7};
  for (TokenFileFormat f : {TokenFileFormat::NanoGpt, TokenFileFormat::Llmc}) {
    const auto path = dir / ("t_" + enum_string(f) + ".bin");
    write_token_file(path, ids, f);
    EXPECT_EQ(std::filesystem::file_size(path), (f == TokenFileFormat::Llmc ? 1024u : 0u) + 2 * ids.size());
    const MappedTokenFile file(path);
    EXPECT_EQ(file.format(), f);
    ASSERT_EQ(file.tokens().size(), ids.size());
    for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(file.tokens()[i], ids[i]);
  }
  EXPECT_THROW(write_token_file(dir / "big.bin", std::vector<int32_t>{65536}, TokenFileFormat::NanoGpt), DataError);
  EXPECT_THROW(write_token_file(dir / "neg.bin", std::vector<int32_t>{-1}, TokenFileFormat::Llmc), DataError);
  write_bytes(dir / "empty.bin", {});
  EXPECT_TRUE(MappedTokenFile(dir / "empty.bin").tokens().empty());
  EXPECT_THROW(MappedTokenFile(dir / "none.bin"), DataError);
  EXPECT_THROW(MappedTokenFile(dir.path()), DataError);
}

TEST(TokenFile, ChecksEveryIdAgainstTheVocabulary) {
  const std::vector<uint16_t> tokens = {1, 2, 999, 3, 1000, 4};
  EXPECT_NO_THROW(check_token_ids(tokens, 1001, "t.bin"));
  EXPECT_NO_THROW(check_token_ids(tokens, 0, "t.bin"));
  try {
    check_token_ids(tokens, 1000, "t.bin");
    FAIL() << "no DataError";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(),
                 "token file t.bin: token 1000 at position 4 is not below model.vocab_size = 1000 (the largest id in "
                 "the file is 1000)");
  }
}

}  // namespace
}  // namespace meshtrain
