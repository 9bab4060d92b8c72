#include "meshtrain/data/bpe/bpe_model.hpp"

#include <gtest/gtest.h>

#include "meshtrain/core/error.hpp"
#include "meshtrain/data/bpe/byte_unicode.hpp"
#include "../test_files.hpp"

namespace meshtrain::bpe {
namespace {

using Ids = std::vector<int32_t>;
using Merges = std::vector<std::pair<std::string, std::string>>;
using meshtrain::testing::data_error;

// Bytes 0..255 as ids 0..255, then each merge's result in merge order.
BpeModel model_with(const Merges& merges, BpeOptions options = {}) {
  std::vector<std::pair<std::string, int32_t>> vocab;
  for (int b = 0; b < 256; ++b) vocab.emplace_back(bytes_to_token_text(std::string(1, char(b))), b);
  for (const auto& [a, b] : merges)
    if (std::none_of(vocab.begin(), vocab.end(), [&](const auto& v) { return v.first == a + b; }))
      vocab.emplace_back(a + b, static_cast<int32_t>(vocab.size()));
  return BpeModel(vocab, merges, options);
}

Ids encode(const BpeModel& m, std::string_view raw) {
  Ids out;
  m.encode_piece(raw, out);
  return out;
}

Ids ids_of(const BpeModel& m, std::initializer_list<std::string_view> texts) {
  Ids out;
  for (std::string_view t : texts) out.push_back(*m.token_id(t));
  return out;
}

TEST(BpeModel, NoMergesIsOneTokenPerByte) {
  const BpeModel m = model_with({});
  EXPECT_EQ(encode(m, "ab\n"), (Ids{'a', 'b', '\n'}));
  EXPECT_TRUE(encode(m, "").empty());
  EXPECT_EQ(m.vocab_size(), 256);
}

TEST(BpeModel, LowestRankMergesFirst) {
  // (b, c) outranks (a, b): "abc" is a + bc, though (a, b) comes first in the text.
  const BpeModel m = model_with({{"b", "c"}, {"a", "b"}, {"ab", "c"}});
  EXPECT_EQ(encode(m, "abc"), ids_of(m, {"a", "bc"}));
  const BpeModel n = model_with({{"a", "b"}, {"ab", "c"}, {"b", "c"}});
  EXPECT_EQ(encode(n, "abc"), ids_of(n, {"abc"}));
  EXPECT_EQ(encode(n, "abcbc"), ids_of(n, {"abc", "bc"}));
}

TEST(BpeModel, EqualRanksMergeLeftmostFirst) {
  const BpeModel m = model_with({{"a", "a"}, {"aa", "aa"}});
  EXPECT_EQ(encode(m, "aaa"), ids_of(m, {"aa", "a"}));
  EXPECT_EQ(encode(m, "aaaa"), ids_of(m, {"aaaa"}));
  EXPECT_EQ(encode(m, "aaaaa"), ids_of(m, {"aaaa", "a"}));
}

TEST(BpeModel, MergesSpellBytesAsGpt2) {
  // " the" is "Ġthe" in the vocabulary.
  const BpeModel m = model_with({{"\u0120", "t"}, {"h", "e"}, {"\u0120t", "he"}});
  EXPECT_EQ(encode(m, " the"), ids_of(m, {"\u0120the"}));
  EXPECT_EQ(*m.token_text(ids_of(m, {"\u0120the"})[0]), "\u0120the");
  EXPECT_EQ(m.merges().size(), 3u);
}

TEST(BpeModel, MissingBytesAreDroppedOrUnknown) {
  std::vector<std::pair<std::string, int32_t>> vocab = {{"a", 0}, {"b", 1}, {"<unk>", 2}, {"ab", 3}};
  // Dropped bytes leave their neighbours adjacent, and they merge.
  const BpeModel drop(vocab, {{"a", "b"}});
  EXPECT_EQ(encode(drop, "axxb"), (Ids{3}));
  EXPECT_EQ(encode(drop, "axxa"), (Ids{0, 0}));
  EXPECT_EQ(encode(drop, "ab"), (Ids{3}));
  BpeOptions options;
  options.unk_id = 2;
  const BpeModel unk(vocab, {{"a", "b"}}, options);  // unknowns keep them apart
  EXPECT_EQ(encode(unk, "axxb"), (Ids{0, 2, 2, 1}));
  options.fuse_unk = true;
  const BpeModel fused(vocab, {{"a", "b"}}, options);
  EXPECT_EQ(encode(fused, "axxb"), (Ids{0, 2, 1}));
}

TEST(BpeModel, IgnoreMergesTakesWholeWordTokens) {
  // "abc" is a token, but no merge chain reaches it.
  std::vector<std::pair<std::string, int32_t>> vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"abc", 4}};
  EXPECT_EQ(encode(BpeModel(vocab, {{"a", "b"}}), "abc"), (Ids{3, 2}));
  BpeOptions options;
  options.ignore_merges = true;
  EXPECT_EQ(encode(BpeModel(vocab, {{"a", "b"}}, options), "abc"), (Ids{4}));
}

TEST(BpeModel, CacheGivesTheSameIds) {
  const BpeModel m = model_with({{"a", "b"}, {"ab", "c"}});
  BpeModel::Cache cache;
  Ids out;
  cache.encode(m, "abc", out);
  cache.encode(m, "ab", out);
  cache.encode(m, "abc", out);
  EXPECT_EQ(out, ids_of(m, {"abc", "ab", "abc"}));
  EXPECT_EQ(cache.size(), 2u);
}

TEST(BpeModel, RejectsInconsistentVocabularyAndMerges) {
  EXPECT_NE(data_error([] { BpeModel({{"a", 0}, {"b", 1}}, {{"a", "b"}}); }).find("'ab' is not in the vocabulary"),
            std::string::npos);
  EXPECT_NE(data_error([] { BpeModel({{"a", 0}, {"b", 0}}, {}); }).find("id 0 is given to both"), std::string::npos);
  EXPECT_NE(data_error([] { BpeModel({{"a", -1}}, {}); }).find("negative id"), std::string::npos);
}

}  // namespace
}  // namespace meshtrain::bpe
