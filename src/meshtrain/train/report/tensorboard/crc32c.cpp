#include "meshtrain/train/report/tensorboard/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace meshtrain::tensorboard {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;  // Castagnoli, bit-reversed

// Slicing-by-8: table[k][b] is the CRC of byte b followed by k zero bytes,
// so eight bytes fold in with eight lookups and no dependency between them.
using Tables = std::array<std::array<uint32_t, 256>, 8>;
constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c & 1) ? (c >> 1) ^ kPolynomial : c >> 1;
    t[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; ++b)
    for (size_t k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  return t;
}
constexpr Tables kTables = make_tables();

// Both versions work on the inverted register (~crc in, ~register out),
// the usual convention that makes the CRC of "" zero and lets calls chain.
uint32_t table_update(uint32_t reg, const uint8_t* p, size_t n) {
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);  // little-endian, as every target of this build
    std::memcpy(&hi, p + 4, 4);
    lo ^= reg;
    reg = kTables[7][lo & 0xFF] ^ kTables[6][(lo >> 8) & 0xFF] ^ kTables[5][(lo >> 16) & 0xFF] ^
          kTables[4][lo >> 24] ^ kTables[3][hi & 0xFF] ^ kTables[2][(hi >> 8) & 0xFF] ^
          kTables[1][(hi >> 16) & 0xFF] ^ kTables[0][hi >> 24];
  }
  for (; n > 0; --n, ++p) reg = (reg >> 8) ^ kTables[0][(reg ^ *p) & 0xFF];
  return reg;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t sse42_update(uint32_t reg, const uint8_t* p, size_t n) {
  uint64_t r = reg;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    r = _mm_crc32_u64(r, word);
  }
  uint32_t r32 = static_cast<uint32_t>(r);
  for (; n > 0; --n, ++p) r32 = _mm_crc32_u8(r32, *p);
  return r32;
}
#endif

// Asked once, on first use (not during static initialization, which may run
// before the compiler's CPU probe).
bool have_sse42() {
#if defined(__x86_64__)
  static const bool have = (__builtin_cpu_init(), __builtin_cpu_supports("sse4.2"));
  return have;
#else
  return false;
#endif
}

}  // namespace

uint32_t crc32c_portable(uint32_t crc, const void* data, size_t bytes) {
  return ~table_update(~crc, static_cast<const uint8_t*>(data), bytes);
}

uint32_t crc32c(uint32_t crc, const void* data, size_t bytes) {
#if defined(__x86_64__)
  if (have_sse42()) return ~sse42_update(~crc, static_cast<const uint8_t*>(data), bytes);
#endif
  return crc32c_portable(crc, data, bytes);
}

bool crc32c_uses_sse42() { return have_sse42(); }

}  // namespace meshtrain::tensorboard
