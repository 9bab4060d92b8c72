#pragma once
// GPT-2's bytes_to_unicode: every byte gets a printable code point, so a
// byte-level BPE vocabulary is a list of ordinary strings. The printable
// bytes '!'..'~', '¡'..'¬' and '®'..'ÿ' stand for themselves; the other 68
// (control characters, space, DEL, NBSP, soft hyphen...) become U+0100,
// U+0101, ... in byte order, so the space 0x20 is 'Ġ' (U+0120) and the
// newline 0x0A is 'Ċ' (U+010A).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace meshtrain::bpe {

// The code point that stands for byte b.
char32_t byte_to_unicode(uint8_t b);
// The byte a code point stands for; nullopt for one outside the table.
std::optional<uint8_t> unicode_to_byte(char32_t c);

// UTF-8 of byte_to_unicode for each byte of raw: the vocabulary's spelling of raw bytes.
std::string bytes_to_token_text(std::string_view raw);
// The inverse: the bytes a token's text stands for; nullopt when the text is
// not UTF-8 or holds a code point outside the table.
std::optional<std::string> token_text_to_bytes(std::string_view text);

// UTF-8 helpers. append_utf8 writes c; next_utf8 decodes the code point at
// text[pos] and advances pos, or returns nullopt (pos unchanged) for a
// malformed sequence.
void append_utf8(char32_t c, std::string& out);
std::optional<char32_t> next_utf8(std::string_view text, size_t& pos);

}  // namespace meshtrain::bpe
