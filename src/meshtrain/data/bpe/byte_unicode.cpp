#include "meshtrain/data/bpe/byte_unicode.hpp"

#include <array>

namespace meshtrain::bpe {
namespace {

struct Tables {
  std::array<char32_t, 256> to_unicode{};
  std::array<int16_t, 324> to_byte{};  // code points < 256 + 68; -1: none
  std::array<std::string, 256> utf8;   // to_unicode as UTF-8
  Tables() {
    to_byte.fill(-1);
    // As GPT-2's encoder.py: the printable bytes keep their value, the rest
    // take 256, 257, ... in byte order.
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_unicode[b] = printable ? static_cast<char32_t>(b) : next++;
      to_byte[to_unicode[b]] = static_cast<int16_t>(b);
      append_utf8(to_unicode[b], utf8[b]);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_unicode(uint8_t b) { return tables().to_unicode[b]; }

std::optional<uint8_t> unicode_to_byte(char32_t c) {
  if (c >= tables().to_byte.size() || tables().to_byte[c] < 0) return std::nullopt;
  return static_cast<uint8_t>(tables().to_byte[c]);
}

std::string bytes_to_token_text(std::string_view raw) {
  const Tables& t = tables();
  std::string out;
  out.reserve(raw.size() * 2);
  for (const char c : raw) out += t.utf8[static_cast<uint8_t>(c)];
  return out;
}

std::optional<std::string> token_text_to_bytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const std::optional<char32_t> c = next_utf8(text, pos);
    if (!c) return std::nullopt;
    const std::optional<uint8_t> b = unicode_to_byte(*c);
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
  }
  return out;
}

void append_utf8(char32_t c, std::string& out) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::optional<char32_t> next_utf8(std::string_view text, size_t& pos) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(pos);
  int extra;
  char32_t c;
  if (lead < 0x80) {
    ++pos;
    return lead;
  } else if ((lead & 0xE0) == 0xC0) {
    extra = 1, c = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    extra = 2, c = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    extra = 3, c = lead & 0x07;
  } else {
    return std::nullopt;
  }
  if (pos + static_cast<size_t>(extra) >= text.size()) return std::nullopt;  // cut short
  for (int k = 1; k <= extra; ++k) {
    if ((byte(pos + k) & 0xC0) != 0x80) return std::nullopt;
    c = (c << 6) | (byte(pos + k) & 0x3F);
  }
  static constexpr char32_t kMin[] = {0, 0x80, 0x800, 0x10000};
  if (c < kMin[extra] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return std::nullopt;
  pos += static_cast<size_t>(extra) + 1;
  return c;
}

}  // namespace meshtrain::bpe
