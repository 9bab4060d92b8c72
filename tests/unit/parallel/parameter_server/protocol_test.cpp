// The parameter-server wire format: round trips and rejected garbage.
#include <gtest/gtest.h>

#include <cstring>

#include "meshtrain/parallel/parameter_server/protocol.hpp"

namespace meshtrain::parallel::ps {
namespace {

TEST(PsProtocol, HeaderRoundTrips) {
  const std::string bytes = encode_message(Kind::Push, 3, 17, -2, "abcd");
  ASSERT_EQ(bytes.size(), kHeaderBytes + 4);
  std::string error;
  auto h = decode_header(bytes, error);
  ASSERT_TRUE(h) << error;
  EXPECT_EQ(h->kind, Kind::Push);
  EXPECT_EQ(h->rank, 3);
  EXPECT_EQ(h->step, 17);
  EXPECT_EQ(h->clock, -2);
  EXPECT_EQ(h->payload_bytes, 4u);
  EXPECT_EQ(bytes.substr(kHeaderBytes), "abcd");
}

TEST(PsProtocol, RejectsCorruptHeaders) {
  std::string error;
  EXPECT_FALSE(decode_header("short", error));
  std::string bad_magic = encode_message(Kind::Pull, 0, 0, 0, {});
  bad_magic[0] ^= 1;
  EXPECT_FALSE(decode_header(bad_magic, error));
  EXPECT_NE(error.find("magic"), std::string::npos);
  for (uint8_t kind : {uint8_t{0}, uint8_t{11}, uint8_t{255}}) {
    std::string b = encode_message(Kind::Pull, 0, 0, 0, {});
    b[4] = static_cast<char>(kind);
    EXPECT_FALSE(decode_header(b, error)) << int(kind);
  }
  std::string huge = encode_message(Kind::Push, 0, 0, 0, {});
  const uint64_t too_big = kMaxPayloadBytes + 1;
  std::memcpy(huge.data() + offsetof(Header, payload_bytes), &too_big, sizeof too_big);
  EXPECT_FALSE(decode_header(huge, error));
  EXPECT_NE(error.find("over the limit"), std::string::npos);
}

TEST(PsProtocol, HelloRoundTrips) {
  HelloPayload h{.token = "tok", .job_id = "job-7", .world_size = 6, .begin = 16, .end = 4096, .flat_size = 9000};
  auto back = decode_hello(encode_hello(h));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->token, "tok");
  EXPECT_EQ(back->job_id, "job-7");
  EXPECT_EQ(back->world_size, 6);
  EXPECT_EQ(back->begin, 16u);
  EXPECT_EQ(back->end, 4096u);
  EXPECT_EQ(back->flat_size, 9000u);
}

TEST(PsProtocol, RejectsMalformedHello) {
  const std::string good = encode_hello({.token = "t", .job_id = "j", .world_size = 2});
  for (size_t n = 0; n < good.size(); ++n) EXPECT_FALSE(decode_hello(good.substr(0, n))) << n;
  EXPECT_FALSE(decode_hello(good + "x"));  // trailing bytes
  std::string long_len = good;
  const uint64_t len = uint64_t{1} << 40;
  std::memcpy(long_len.data(), &len, sizeof len);
  EXPECT_FALSE(decode_hello(long_len));
}

}  // namespace
}  // namespace meshtrain::parallel::ps
