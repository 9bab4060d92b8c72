// PyTorch's TCPStore wire format, byte for byte, in both generations.
#include "meshtrain/comm/rendezvous/torch_store_protocol.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace meshtrain::comm::rendezvous::torch_store {
namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int v : b) s.push_back(static_cast<char>(v));
  return s;
}

std::string u64(uint64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return s;
}

TEST(TorchStoreProtocol, QueryNumbersOfBothGenerations) {
  EXPECT_EQ(query_byte(Generation::Legacy, Query::Set), 0);
  EXPECT_EQ(query_byte(Generation::Legacy, Query::Get), 2);
  EXPECT_EQ(query_byte(Generation::Legacy, Query::Wait), 5);
  EXPECT_EQ(query_byte(Generation::Current, Query::Set), 1);  // VALIDATE took 0
  EXPECT_EQ(query_byte(Generation::Current, Query::Get), 3);
  EXPECT_EQ(query_byte(Generation::Current, Query::Wait), 6);
}

TEST(TorchStoreProtocol, ValidateIsTheMagicNumberLittleEndian) {
  EXPECT_EQ(encode_validate(Generation::Current), bytes({0, 0xCE, 0xF7, 0x85, 0x3C}));
  EXPECT_EQ(encode_validate(Generation::Legacy), "");
}

TEST(TorchStoreProtocol, RequestsAreLengthPrefixed) {
  EXPECT_EQ(encode_set(Generation::Current, "k", "vv"), bytes({1}) + u64(1) + "k" + u64(2) + "vv");
  EXPECT_EQ(encode_set(Generation::Legacy, "", ""), bytes({0}) + u64(0) + u64(0));
  EXPECT_EQ(encode_get(Generation::Legacy, "key"), bytes({2}) + u64(3) + "key");
  const std::vector<std::string> keys{"a", "bc"};
  EXPECT_EQ(encode_wait(Generation::Current, keys), bytes({6}) + u64(2) + u64(1) + "a" + u64(2) + "bc");
}

TEST(TorchStoreProtocol, DecodesInt64) {
  EXPECT_EQ(decode_int64(u64(5)), 5);
  EXPECT_EQ(decode_int64(u64(static_cast<uint64_t>(-7))), -7);
}

// The probe must read, to a legacy store, as a SET whose key length no
// machine can allocate (so nothing is ever allocated or stored).
TEST(TorchStoreProtocol, ProbeIsHarmlessToALegacyStore) {
  const std::string p = generation_probe();
  ASSERT_EQ(p.size(), 9u);
  EXPECT_EQ(p.substr(0, 5), encode_validate(Generation::Current));
  EXPECT_EQ(static_cast<uint8_t>(p[0]), query_byte(Generation::Legacy, Query::Set));
  const auto legacy_key_length = static_cast<uint64_t>(decode_int64(p.substr(1, 8)));
  EXPECT_GT(legacy_key_length, uint64_t{1} << 56);
  for (size_t i = 5; i < 9; ++i) EXPECT_EQ(static_cast<uint8_t>(p[i]), 7) << "GETNUMKEYS in the current numbering";
}

}  // namespace
}  // namespace meshtrain::comm::rendezvous::torch_store
