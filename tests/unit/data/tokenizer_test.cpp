#include "meshtrain/data/tokenizer.hpp"

#include <gtest/gtest.h>

#include "meshtrain/core/error.hpp"

namespace meshtrain {
namespace {

TEST(ByteTokenizer, RoundTripsEveryByte) {
  std::string text;
  for (int b = 0; b < 256; ++b) text.push_back(static_cast<char>(b));
  text += "In the beginning God created the heaven and the earth.";
  const std::vector<int32_t> tokens = ByteTokenizer::encode(text);
  ASSERT_EQ(tokens.size(), text.size());
  for (int b = 0; b < 256; ++b) EXPECT_EQ(tokens[b], b);  // bytes >= 0x80 are not negative
  EXPECT_EQ(ByteTokenizer::decode(tokens), text);
}

TEST(ByteTokenizer, EmptyTextIsNoTokens) {
  EXPECT_TRUE(ByteTokenizer::encode("").empty());
  EXPECT_EQ(ByteTokenizer::decode({}), "");
}

TEST(ByteTokenizer, RejectsTokensOutsideVocabulary) {
  EXPECT_EQ(ByteTokenizer::kVocabSize, 256);
  const std::vector<int32_t> too_big = {65, 256};
  const std::vector<int32_t> negative = {-1};
  EXPECT_THROW(ByteTokenizer::decode(too_big), DataError);
  EXPECT_THROW(ByteTokenizer::decode(negative), DataError);
}

}  // namespace
}  // namespace meshtrain
