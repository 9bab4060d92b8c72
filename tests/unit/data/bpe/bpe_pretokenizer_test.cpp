#include "meshtrain/data/bpe/pretokenizer.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace meshtrain::bpe {
namespace {

std::vector<std::string> pieces(std::string_view text) {
  static const Pretokenizer regex;
  std::vector<std::string> out;
  regex.split(text, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

using Pieces = std::vector<std::string>;

TEST(Pretokenizer, SplitsAsGpt2Regex) {
  EXPECT_EQ(pieces("Hello world's 123  end\n\n"),
            (Pieces{"Hello", " world", "'s", " 123", " ", " end", "\n\n"}));
  // \s+(?!\S) leaves the last white space before a word to the word's piece.
  EXPECT_EQ(pieces("a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(pieces("I'll don't they're"), (Pieces{"I", "'ll", " don", "'t", " they", "'re"}));
  EXPECT_EQ(pieces("x=1+2;!?"), (Pieces{"x", "=", "1", "+", "2", ";!?"}));
  EXPECT_EQ(pieces("1:1 In the"), (Pieces{"1", ":", "1", " In", " the"}));
  EXPECT_TRUE(pieces("").empty());
}

TEST(Pretokenizer, UsesUnicodeLettersNumbersAndSpaces) {
  EXPECT_EQ(pieces("caf\u00E9 \u65E5\u672C \u0663\u0664"), (Pieces{"caf\u00E9", " \u65E5\u672C", " \u0663\u0664"}));
  // U+3000 (ideographic space) is white space under Unicode rules, but only
  // ' ' joins the word after it.
  EXPECT_EQ(pieces("a\u3000b"), (Pieces{"a", "\u3000", "b"}));
  EXPECT_EQ(pieces("a\u3000\u3000b"), (Pieces{"a", "\u3000", "\u3000", "b"}));
}

TEST(Pretokenizer, BytesThatAreNotUtf8AreTheirOwnPieces) {
  EXPECT_EQ(pieces("ab\xFF\xFE" "cd"), (Pieces{"ab", "\xFF\xFE", "cd"}));
  EXPECT_EQ(pieces("ab\xC3"), (Pieces{"ab", "\xC3"}));
  std::string joined;
  for (const auto& p : pieces("mixed \x80 text\xE2\x82 end")) joined += p;
  EXPECT_EQ(joined, "mixed \x80 text\xE2\x82 end");
}

TEST(Pretokenizer, LongWhiteSpaceRunsFitTheJitStack) {
  const std::string text = "a" + std::string(200000, ' ') + "b";
  const Pieces p = pieces(text);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[1].size(), 199999u);
  EXPECT_EQ(p[2], " b");
}

}  // namespace
}  // namespace meshtrain::bpe
