// The rendezvous frame decoder: exact cases, then tens of thousands of random
// and mutated frames (fixed seed) that must each be accepted or rejected with
// the invariants below, never crash. CI runs this under ASan/UBSan; the
// open-ended version is fuzz/frame_decoder_fuzz.cpp.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "meshtrain/comm/rendezvous/frame.hpp"

namespace meshtrain::comm::rendezvous {
namespace {

const FrameLimits kSmall{64, 256, kFrameHeaderBytes + 64 + 200};

// What every decode result must satisfy, whatever the input.
void check_invariants(std::string_view in, const FrameLimits& limits) {
  const DecodeResult r = decode_frame(in, limits);
  switch (r.status) {
    case DecodeStatus::Complete: {
      ASSERT_LE(r.consumed, in.size());
      ASSERT_LE(r.frame.key.size(), limits.max_key);
      ASSERT_LE(r.frame.value.size(), limits.max_value);
      ASSERT_LE(r.consumed, limits.max_frame);
      ASSERT_EQ(encode_frame(r.frame.type, r.frame.key, r.frame.value), in.substr(0, r.consumed));
      if (r.frame.type == FrameType::Hello) {
        if (auto hello = parse_hello_value(r.frame.value)) {
          ASSERT_LE(hello->job_id.size(), kMaxJobIdBytes);
        }
      }
      break;
    }
    case DecodeStatus::Incomplete:
      ASSERT_GT(r.needed, in.size());
      ASSERT_LE(r.needed, limits.max_frame);
      break;
    case DecodeStatus::Invalid:
      ASSERT_FALSE(r.error.empty());
      break;
  }
}

TEST(FrameDecoder, RoundTripsEveryType) {
  for (auto type : {FrameType::Hello, FrameType::Set, FrameType::Get, FrameType::Ok, FrameType::Value,
                    FrameType::Error}) {
    const std::string bytes = encode_frame(type, "tcp/addr/3", "127.0.0.1:5000");
    const std::string stream = bytes + "trailing";  // the views point into it
    const DecodeResult r = decode_frame(stream);
    ASSERT_EQ(r.status, DecodeStatus::Complete);
    EXPECT_EQ(r.consumed, bytes.size());
    EXPECT_EQ(r.frame.type, type);
    EXPECT_EQ(r.frame.key, "tcp/addr/3");
    EXPECT_EQ(r.frame.value, "127.0.0.1:5000");
  }
}

TEST(FrameDecoder, EveryPrefixOfAFrameIsIncomplete) {
  const std::string bytes = encode_frame(FrameType::Set, "key", std::string(100, 'v'));
  for (size_t n = 0; n < bytes.size(); ++n) {
    const DecodeResult r = decode_frame(std::string_view(bytes).substr(0, n));
    ASSERT_EQ(r.status, DecodeStatus::Incomplete) << n;
    if (n >= kFrameHeaderBytes) {
      EXPECT_EQ(r.needed, bytes.size());
    }
  }
}

TEST(FrameDecoder, RejectsOversizedLengthsFromTheHeaderAlone) {
  std::string header = encode_frame(FrameType::Set, std::string(65, 'k'), "");
  EXPECT_EQ(decode_frame(header.substr(0, kFrameHeaderBytes), kSmall).status, DecodeStatus::Invalid);
  header = encode_frame(FrameType::Set, "", std::string(257, 'v'));
  EXPECT_EQ(decode_frame(header.substr(0, kFrameHeaderBytes), kSmall).status, DecodeStatus::Invalid);
  header = encode_frame(FrameType::Set, std::string(64, 'k'), std::string(250, 'v'));  // each fits, sum does not
  const DecodeResult r = decode_frame(header.substr(0, kFrameHeaderBytes), kSmall);
  EXPECT_EQ(r.status, DecodeStatus::Invalid);
  EXPECT_NE(r.error.find("exceeds the limit"), std::string::npos) << r.error;
  // 4 GiB lengths must not overflow the size arithmetic.
  std::string huge = header.substr(0, 5) + std::string(8, '\xff');
  EXPECT_EQ(decode_frame(huge).status, DecodeStatus::Invalid);
}

TEST(FrameDecoder, RejectsBadMagicAndUnknownTypes) {
  EXPECT_EQ(decode_frame("GET / HTTP/1.1\r\n\r\n").status, DecodeStatus::Invalid);
  EXPECT_EQ(decode_frame("G").status, DecodeStatus::Invalid);  // judged from the first byte
  std::string bytes = encode_frame(FrameType::Ok, "", "");
  bytes[4] = 0;
  EXPECT_EQ(decode_frame(bytes).status, DecodeStatus::Invalid);
  bytes[4] = 7;
  EXPECT_EQ(decode_frame(bytes).status, DecodeStatus::Invalid);
}

TEST(FrameDecoder, HelloValue) {
  const auto hello = parse_hello_value(encode_hello_value({3, 8, "job-42"}));
  ASSERT_TRUE(hello);
  EXPECT_EQ(hello->rank, 3);
  EXPECT_EQ(hello->world_size, 8);
  EXPECT_EQ(hello->job_id, "job-42");
  EXPECT_FALSE(parse_hello_value("short"));
  EXPECT_FALSE(parse_hello_value(std::string(8 + kMaxJobIdBytes + 1, 'x')));
  EXPECT_TRUE(tokens_equal("secret", "secret"));
  EXPECT_FALSE(tokens_equal("secret", "secreT"));
  EXPECT_FALSE(tokens_equal("secret", "secret2"));
  EXPECT_FALSE(tokens_equal("", "x"));
}

// Random bytes, valid frames, and valid frames with bytes flipped, inserted,
// removed or truncated, under the default and a small set of limits.
TEST(FrameDecoder, SurvivesRandomAndMutatedFrames) {
  std::mt19937_64 rng(20240611);
  auto rand_string = [&](size_t max_len) {
    std::string s(rng() % (max_len + 1), '\0');
    for (char& c : s) c = static_cast<char>(rng());
    return s;
  };
  int complete = 0, incomplete = 0, invalid = 0;
  for (int iter = 0; iter < 40000; ++iter) {
    std::string in;
    switch (iter % 4) {
      case 0:
        in = rand_string(64);
        if (rng() % 2 && in.size() >= 4) in.replace(0, 4, "MTKV");  // get past the magic often
        break;
      default: {
        const auto type = static_cast<FrameType>(1 + rng() % 6);
        in = encode_frame(type, rand_string(80), type == FrameType::Hello
                                                     ? encode_hello_value({static_cast<int32_t>(rng()), 4, rand_string(300)})
                                                     : rand_string(300));
        const int mutations = static_cast<int>(rng() % 4);
        for (int m = 0; m < mutations && !in.empty(); ++m) {
          const size_t at = rng() % in.size();
          switch (rng() % 4) {
            case 0: in[at] = static_cast<char>(rng()); break;
            case 1: in.insert(at, 1, static_cast<char>(rng())); break;
            case 2: in.erase(at, 1); break;
            case 3: in.resize(at); break;
          }
        }
      }
    }
    for (const FrameLimits& limits : {FrameLimits{}, kSmall}) {
      check_invariants(in, limits);
      if (::testing::Test::HasFatalFailure()) FAIL() << "iteration " << iter;
      switch (decode_frame(in, limits).status) {
        case DecodeStatus::Complete: ++complete; break;
        case DecodeStatus::Incomplete: ++incomplete; break;
        case DecodeStatus::Invalid: ++invalid; break;
      }
    }
  }
  // The corpus must exercise all three outcomes, or it tests little.
  EXPECT_GT(complete, 1000);
  EXPECT_GT(incomplete, 1000);
  EXPECT_GT(invalid, 1000);
}

}  // namespace
}  // namespace meshtrain::comm::rendezvous
