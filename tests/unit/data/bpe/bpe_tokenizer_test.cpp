#include "meshtrain/data/bpe/bpe_tokenizer.hpp"

#include <gtest/gtest.h>

#include "meshtrain/core/error.hpp"
#include "meshtrain/data/bpe/bpe_trainer.hpp"
#include "meshtrain/data/bpe/byte_unicode.hpp"
#include "meshtrain/data/bpe/tokenizer_json.hpp"
#include "../test_files.hpp"

namespace meshtrain::bpe {
namespace {

using Ids = std::vector<int32_t>;
using testing::TempDir;
using testing::data_error;
using testing::write_text;

// The 256 bytes at ids 0..255 (by byte), merges after them.
TokenizerSpec spec_with(const std::vector<std::pair<std::string, std::string>>& merges) {
  TokenizerSpec spec;
  for (int b = 0; b < 256; ++b) spec.vocab.push_back(bytes_to_token_text(std::string(1, char(b))));
  for (const auto& [a, b] : merges) spec.vocab.push_back(a + b);
  spec.merges = merges;
  return spec;
}

BpeTrainerOptions options(int64_t vocab_size, int threads = 0, int64_t min_frequency = 0,
                          std::vector<std::string> special = {}) {
  BpeTrainerOptions o;
  o.vocab_size = vocab_size, o.threads = threads, o.min_frequency = min_frequency, o.special_tokens = special;
  return o;
}

BpeTokenizer load_spec(const TempDir& dir, const TokenizerSpec& spec) {
  save_tokenizer_json(dir / "tokenizer.json", spec);
  return load_tokenizer(dir / "tokenizer.json");
}

TEST(BpeTokenizer, EncodesPiecesAndDecodesBack) {
  TempDir dir;
  const BpeTokenizer t = load_spec(dir, spec_with({{"\u0120", "w"}, {"\u0120w", "o"}, {"h", "i"}}));
  const int32_t hi = 258, wo = 257;
  EXPECT_EQ(t.encode("hi wo"), (Ids{hi, wo}));
  EXPECT_EQ(t.encode("hi wo\n"), (Ids{hi, wo, '\n'}));
  EXPECT_EQ(t.decode(t.encode("hi wo, caf\u00E9!\n")), "hi wo, caf\u00E9!\n");
  EXPECT_EQ(t.vocab_size(), 259);
  EXPECT_THROW(t.decode(Ids{259}), DataError);
}

TEST(BpeTokenizer, AddPrefixSpaceAndAddedTokens) {
  TempDir dir;
  TokenizerSpec spec = spec_with({{"\u0120", "w"}, {"\u0120w", "o"}});
  spec.vocab.push_back("<|endoftext|>");
  spec.added.push_back({.content = "<|endoftext|>", .id = 258, .special = true});
  spec.add_prefix_space = true;
  const BpeTokenizer t = load_spec(dir, spec);
  const int32_t wo = 257, eot = 258;
  // Each stretch between added tokens gets its leading space.
  EXPECT_EQ(t.encode("wo"), (Ids{wo}));
  EXPECT_EQ(t.encode("wo<|endoftext|>wo"), (Ids{wo, eot, wo}));
  EXPECT_EQ(t.encode(" wo"), (Ids{wo}));
  EXPECT_EQ(t.decode(Ids{wo, eot}), " wo<|endoftext|>");
}

TEST(BpeTokenizer, ThreadsAndChunksGiveTheSameIds) {
  TempDir dir;
  // A trained tokenizer over a text long enough for many chunks, with
  // newlines in every kind of neighbourhood.
  std::string text;
  for (int i = 0; i < 40000; ++i)
    text += "line " + std::to_string(i) + (i % 3 ? ": the words\n" : i % 5 ? "  \n\nx\n" : "\n \u00E9t\u00E9\n");
  const TokenizerSpec spec = train_bpe(text, options(400, 2), [](TrainPhase, size_t, size_t) {});
  const BpeTokenizer t = load_spec(dir, spec);
  // One thread, one stretch: the reference (a text shorter than a chunk is one chunk).
  Ids reference;
  for (size_t at = 0; at < text.size();) {
    // Cut only where a line ends before "line": the regex pieces do not cross it.
    size_t next = text.find("\nline", at + 1000);
    next = next == std::string::npos ? text.size() : next + 1;
    const Ids part = t.encode(std::string_view(text).substr(at, next - at));
    reference.insert(reference.end(), part.begin(), part.end());
    at = next;
  }
  size_t calls = 0;
  EXPECT_EQ(t.encode(text, 2, [&](size_t, size_t) { ++calls; }), reference);
  EXPECT_EQ(t.encode(text, 1, [](size_t, size_t) {}), reference);
  EXPECT_GT(calls, 2u);
  EXPECT_EQ(t.decode(reference), text);
}

TEST(TokenizerJson, ReadsGpt2VocabAndMergesFiles) {
  TempDir dir;
  write_text(dir / "vocab.json", R"({"a": 0, "b": 1, "\u0120": 2, "ab": 3, "\u0120ab": 4})");
  write_text(dir / "merges.txt", "#version: 0.2\na b\n\u0120 ab\n");
  const BpeTokenizer t = load_tokenizer(dir / "vocab.json");
  EXPECT_EQ(t.encode("ab ab"), (Ids{3, 4}));
  EXPECT_EQ(load_tokenizer(dir.path()).encode("ab ab"), (Ids{3, 4}));  // the directory
}

TEST(TokenizerJson, ReadsMergesAsPairsAndHuggingFaceFields) {
  TempDir dir;
  write_text(dir / "t.json", R"({"version": "1.0", "added_tokens": [], "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
    "post_processor": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "fuse_unk": false, "byte_fallback": false,
              "ignore_merges": false, "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]}})");
  EXPECT_EQ(load_tokenizer(dir / "t.json").encode("ab"), (Ids{2}));
}

TEST(TokenizerJson, RefusesWhatItWouldEncodeDifferently) {
  TempDir dir;
  const std::string model = R"("model": {"type": "BPE", "vocab": {"a": 0}, "merges": []})";
  const auto err = [&](const std::string& body) {
    write_text(dir / "t.json", "{" + body + "}");
    return data_error([&] { load_tokenizer(dir / "t.json"); });
  };
  EXPECT_NE(err(R"("model": {"type": "WordPiece", "vocab": {}})").find("model type 'WordPiece'"), std::string::npos);
  EXPECT_NE(err(R"("pre_tokenizer": {"type": "Metaspace"}, )" + model).find("pre_tokenizer 'Metaspace'"),
            std::string::npos);
  EXPECT_NE(err(R"("pre_tokenizer": {"type": "ByteLevel"}, "normalizer": {"type": "NFC"}, )" + model)
                .find("normalizer 'NFC'"),
            std::string::npos);
  EXPECT_NE(err(R"("pre_tokenizer": {"type": "ByteLevel"}, "post_processor": {"type": "TemplateProcessing"}, )" +
                model)
                .find("post_processor 'TemplateProcessing'"),
            std::string::npos);
  write_text(dir / "broken.json", "{not json");
  const std::string msg = data_error([&] { load_tokenizer(dir / "broken.json"); });
  EXPECT_NE(msg.find("broken.json"), std::string::npos) << msg;
  EXPECT_NE(data_error([&] { load_tokenizer(dir / "missing.json"); }).find("does not exist"), std::string::npos);
  write_text(dir / "vocab.json", R"({"a": 0})");
  EXPECT_NE(data_error([&] { load_tokenizer(dir / "vocab.json"); }).find("merges.txt"), std::string::npos);
}

TEST(BpeTrainer, MergesTheMostFrequentPairTiesToTheSmallestIds) {
  // Words "ab" and " cd", once each: (a, b), (Ġ, c), (c, d) all count 1.
  // Ids follow code points: 'a' is 64, 'b' 65, 'c' 66, 'd' 67, 'Ġ' 220. So
  // (a, b) first, then (c, d), then (Ġ, cd).
  const auto nothing = [](TrainPhase, size_t, size_t) {};
  const TokenizerSpec spec = train_bpe("ab cd", options(259), nothing);
  ASSERT_EQ(spec.vocab.size(), 259u);
  EXPECT_EQ(spec.vocab[64], "a");
  EXPECT_EQ(spec.vocab[220], "\u0120");
  EXPECT_EQ(spec.merges, (std::vector<std::pair<std::string, std::string>>{{"a", "b"}, {"c", "d"}, {"\u0120", "cd"}}));
  // Counts decide before ids: (c, d) occurs twice.
  const TokenizerSpec counted = train_bpe("ab cd cd", options(257), nothing);
  EXPECT_EQ(counted.merges.front(), (std::pair<std::string, std::string>{"c", "d"}));
  // A pair counts each occurrence; the merge takes them left to right.
  const TokenizerSpec runs = train_bpe("aaa", options(258), nothing);
  EXPECT_EQ(runs.merges, (std::vector<std::pair<std::string, std::string>>{{"a", "a"}, {"aa", "a"}}));
  // min_frequency stops it.
  EXPECT_TRUE(train_bpe("ab cd", options(300, 0, 2), nothing).merges.empty());
  // Special tokens come first.
  const TokenizerSpec special = train_bpe("ab", options(258, 0, 0, {"<|endoftext|>"}), nothing);
  EXPECT_EQ(special.vocab[0], "<|endoftext|>");
  EXPECT_EQ(special.vocab[65], "a");
  ASSERT_EQ(special.added.size(), 1u);
  EXPECT_EQ(special.added[0].id, 0);
  EXPECT_THROW(train_bpe("ab", options(100), nothing), ConfigError);
}

TEST(BpeTrainer, OneAndTwoThreadsLearnTheSameMergesAndEncodeRoundTrips) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 30000; ++i) text += "verse " + std::to_string(i % 97) + " and the lord said unto them\n";
  const auto nothing = [](TrainPhase, size_t, size_t) {};
  const TokenizerSpec one = train_bpe(text, options(320, 1), nothing);
  const TokenizerSpec two = train_bpe(text, options(320, 2), nothing);
  EXPECT_EQ(one.merges, two.merges);
  EXPECT_EQ(one.vocab, two.vocab);
  const BpeTokenizer t = load_spec(dir, one);
  const Ids ids = t.encode(text);
  EXPECT_LT(ids.size(), text.size() / 3);
  EXPECT_EQ(t.decode(ids), text);
}

}  // namespace
}  // namespace meshtrain::bpe
