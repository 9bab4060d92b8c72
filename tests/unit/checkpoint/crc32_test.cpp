// CRC-32 against the standard check value and a bit-at-a-time reference.
#include <gtest/gtest.h>

#include <string>

#include "meshtrain/checkpoint/crc32.hpp"
#include "temp_dir.hpp"

namespace meshtrain::checkpoint {
namespace {

uint32_t reference_crc32(const std::string& s) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char byte : s) {
    c ^= byte;
    for (int i = 0; i < 8; ++i) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
  }
  return ~c;
}

TEST(Crc32, StandardCheckValue) {
  EXPECT_EQ(crc32_update(0, "123456789", 9), 0xCBF43926u);  // zlib.crc32(b"123456789")
  EXPECT_EQ(crc32_update(0, "", 0), 0u);
}

TEST(Crc32, MatchesReferenceAtEveryLengthAndSplit) {
  std::string s;
  for (int i = 0; i < 40; ++i) s.push_back(static_cast<char>(i * 37 + 11));
  for (size_t len = 0; len <= s.size(); ++len) {
    const std::string part = s.substr(0, len);
    EXPECT_EQ(crc32_update(0, part.data(), len), reference_crc32(part)) << len;
    for (size_t split = 0; split <= len; ++split)
      ASSERT_EQ(crc32_update(crc32_update(0, part.data(), split), part.data() + split, len - split),
                reference_crc32(part));
  }
}

TEST(Crc32, DigestFile) {
  testing::TempDir tmp;
  std::string big(3 << 20, 'a');  // spans several read chunks
  for (size_t i = 0; i < big.size(); i += 4093) big[i] = static_cast<char>(i);
  testing::write_bytes(tmp / "f", big);
  FileDigest d = digest_file(tmp / "f");
  EXPECT_EQ(d.bytes, big.size());
  EXPECT_EQ(d.crc32, crc32_update(0, big.data(), big.size()));
}

}  // namespace
}  // namespace meshtrain::checkpoint
