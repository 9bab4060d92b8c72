#include "meshtrain/data/bpe/byte_unicode.hpp"

#include <gtest/gtest.h>

#include <set>

namespace meshtrain::bpe {
namespace {

// GPT-2's encoder.py: printable bytes stand for themselves; the other 68
// take U+0100 on in byte order (0x00-0x20, then 0x7F-0xA0, then 0xAD).
TEST(ByteUnicode, MatchesGpt2Table) {
  EXPECT_EQ(byte_to_unicode('!'), U'!');
  EXPECT_EQ(byte_to_unicode('~'), U'~');
  EXPECT_EQ(byte_to_unicode('a'), U'a');
  EXPECT_EQ(byte_to_unicode(0xA1), U'\u00A1');
  EXPECT_EQ(byte_to_unicode(0xFF), U'\u00FF');
  EXPECT_EQ(byte_to_unicode(0x00), U'\u0100');
  EXPECT_EQ(byte_to_unicode('\n'), U'\u010A');  // 'Ċ'
  EXPECT_EQ(byte_to_unicode(' '), U'\u0120');   // 'Ġ'
  EXPECT_EQ(byte_to_unicode(0x7F), U'\u0121');
  EXPECT_EQ(byte_to_unicode(0xA0), U'\u0142');
  EXPECT_EQ(byte_to_unicode(0xAD), U'\u0143');
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const char32_t c = byte_to_unicode(static_cast<uint8_t>(b));
    EXPECT_TRUE(seen.insert(c).second) << "byte " << b;
    ASSERT_TRUE(unicode_to_byte(c).has_value());
    EXPECT_EQ(*unicode_to_byte(c), b);
  }
  EXPECT_EQ(*seen.rbegin(), U'\u0143');
  EXPECT_FALSE(unicode_to_byte(U' ').has_value());  // the space is written as 'Ġ'
  EXPECT_FALSE(unicode_to_byte(U'\u0144').has_value());
}

TEST(ByteUnicode, TokenTextRoundTripsEveryByte) {
  std::string raw;
  for (int b = 0; b < 256; ++b) raw.push_back(static_cast<char>(b));
  const std::string text = bytes_to_token_text(raw);
  EXPECT_EQ(bytes_to_token_text(" hello\n"), "\u0120hello\u010A");
  const auto back = token_text_to_bytes(text);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, raw);
  EXPECT_FALSE(token_text_to_bytes("a b").has_value());     // a raw space is not a byte's character
  EXPECT_FALSE(token_text_to_bytes("\xC4").has_value());    // cut-off UTF-8
  EXPECT_FALSE(token_text_to_bytes("\u4E2D").has_value());  // outside the table
}

TEST(ByteUnicode, Utf8DecodesAndRejectsMalformed) {
  size_t pos = 0;
  const std::string s = "a\u00E9\u4E2D\U0001F600";
  std::u32string got;
  while (pos < s.size()) got.push_back(*next_utf8(s, pos));
  EXPECT_EQ(got, U"a\u00E9\u4E2D\U0001F600");
  for (std::string bad : {"\x80", "\xC0\xAF", "\xED\xA0\x80", "\xF0\x9F\x98", "\xFF"}) {
    pos = 0;
    EXPECT_FALSE(next_utf8(bad, pos).has_value()) << bad;
    EXPECT_EQ(pos, 0u);
  }
}

}  // namespace
}  // namespace meshtrain::bpe
