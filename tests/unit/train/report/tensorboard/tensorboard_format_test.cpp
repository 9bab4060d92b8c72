// The bytes of TensorBoard event files: CRC-32C against its published check
// values, TFRecord framing, and Event messages against encodings checked by
// hand (each equals what the protobuf library serializes for the same Event).
#include <gtest/gtest.h>

#include <string>

#include "meshtrain/train/report/tensorboard/crc32c.hpp"
#include "meshtrain/train/report/tensorboard/event_proto.hpp"
#include "meshtrain/train/report/tensorboard/tfrecord.hpp"

namespace meshtrain::tensorboard {
namespace {

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::string unhex(const std::string& text) {
  std::string out;
  for (size_t i = 0; i + 1 < text.size(); i += 2) out.push_back(static_cast<char>(std::stoi(text.substr(i, 2), nullptr, 16)));
  return out;
}

uint32_t bitwise_crc32c(const std::string& s) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char byte : s) {
    c ^= byte;
    for (int i = 0; i < 8; ++i) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  }
  return ~c;
}

TEST(Crc32c, CheckValues) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  // RFC 3720 (iSCSI), appendix B.4.
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string up, down;
  for (int i = 0; i < 32; ++i) {
    up.push_back(static_cast<char>(i));
    down.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(crc32c(up), 0x46DD794Eu);
  EXPECT_EQ(crc32c(down), 0x113FDB5Cu);
  for (const std::string& s : {std::string("123456789"), up, down})
    EXPECT_EQ(crc32c_portable(0, s.data(), s.size()), crc32c(s));
}

TEST(Crc32c, BothVersionsMatchTheBitwiseReferenceAtEveryLengthAndSplit) {
  std::string s;
  for (int i = 0; i < 70; ++i) s.push_back(static_cast<char>(i * 73 + 5));
  std::printf("crc32c uses %s\n", crc32c_uses_sse42() ? "the SSE4.2 instruction" : "the table");
  for (size_t len = 0; len <= s.size(); ++len) {
    const std::string part = s.substr(0, len);
    const uint32_t want = bitwise_crc32c(part);
    ASSERT_EQ(crc32c(part), want) << len;
    ASSERT_EQ(crc32c_portable(0, part.data(), len), want) << len;
    for (size_t split = 0; split <= len; ++split) {
      ASSERT_EQ(crc32c(crc32c(0, part.data(), split), part.data() + split, len - split), want);
      ASSERT_EQ(crc32c_portable(crc32c_portable(0, part.data(), split), part.data() + split, len - split), want);
    }
  }
}

TEST(Crc32c, Mask) {
  EXPECT_EQ(masked_crc32c("123456789"), 0xC78AB0E5u);  // ((0xE3069283 >> 15) | (0xE3069283 << 17)) + 0xa282ead8
  EXPECT_EQ(mask_crc32c(0), 0xa282ead8u);
}

TEST(TfRecord, FramesAsTensorFlowDoes) {
  // length 3 (8 bytes LE) | masked CRC of those 8 bytes | "abc" | masked CRC of "abc"
  EXPECT_EQ(hex(frame_record("abc")), "0300000000000000" "b099490e" "616263" "6e57f121");
}

TEST(TfRecord, ScanStopsAtAPartialOrDamagedRecord) {
  const std::string a = frame_record("first"), b = frame_record(""), c = frame_record(std::string(300, 'x'));
  const std::string file = a + b + c;
  RecordScan scan = scan_records(file);
  ASSERT_EQ(scan.records.size(), 3u);
  EXPECT_EQ(scan.records[0], "first");
  EXPECT_EQ(scan.records[1], "");
  EXPECT_EQ(scan.records[2], std::string(300, 'x'));
  EXPECT_EQ(scan.valid_bytes, file.size());
  for (size_t cut = 0; cut < c.size(); ++cut) {  // a writer killed inside the last record
    scan = scan_records(std::string_view(file).substr(0, a.size() + b.size() + cut));
    ASSERT_EQ(scan.records.size(), 2u) << cut;
    ASSERT_EQ(scan.valid_bytes, a.size() + b.size());
  }
  for (size_t at : {size_t(0), size_t(9), size_t(13), a.size() - 1}) {  // length, its CRC, data, data CRC
    std::string damaged = file;
    damaged[at] ^= 0x20;
    EXPECT_EQ(scan_records(damaged).records.size(), 0u) << at;
  }
}

TEST(EventProto, FileVersionEvent) {
  // 09 <double 1700000000.25> | 1a 0d "brain.Event:2"
  EXPECT_EQ(hex(encode_file_version_event(1700000000.25)),
            "09" "00001040fc54d941" "1a0d" "627261696e2e4576656e743a32");
  const auto head = decode_event_head(encode_file_version_event(1.0));
  ASSERT_TRUE(head);
  EXPECT_EQ(head->step, 0);
  EXPECT_FALSE(head->has_summary);
}

TEST(EventProto, ScalarEvent) {
  // 09 <double 1.5>            wall_time (field 1, fixed64)
  // 10 03                      step 3 (field 2, varint)
  // 2a 0a                      summary (field 5, 10 bytes)
  //   0a 08                      value (field 1, 8 bytes)
  //     0a 01 61                   tag "a"
  //     15 00000040                simple_value 2.0f (field 2, fixed32)
  EXPECT_EQ(hex(encode_scalar_event(1.5, 3, {{"a", 2.0f}})),
            "09000000000000f83f" "1003" "2a0a" "0a08" "0a0161" "1500000040");
}

TEST(EventProto, MultiByteVarintsAndZeroValues) {
  // step 300 is the varint ac 02; a 130-byte tag's length 82 01; a value of
  // 0 is still written (it is in a oneof); 175 bytes in all.
  const std::string event = encode_scalar_event(1.0, 300, {{"train/loss", 0.0f}, {std::string(130, 'x'), -1.0f}});
  EXPECT_EQ(event.size(), 175u);
  EXPECT_EQ(hex(event.substr(0, 40)),
            "09000000000000f03f" "10ac02" "2aa001" "0a11" "0a0a747261696e2f6c6f7373" "1500000000" "0a8a01" "0a8201");
  EXPECT_EQ(hex(event.substr(event.size() - 12)), "7878787878787815000080bf");
  const auto head = decode_event_head(event);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->step, 300);
  EXPECT_TRUE(head->has_summary);
}

TEST(EventProto, DecodeRejectsTruncatedMessages) {
  const std::string event = encode_scalar_event(2.0, 7, {{"t", 1.0f}});
  for (size_t cut = 1; cut < event.size(); ++cut) {
    const auto head = decode_event_head(std::string_view(event).substr(0, cut));
    // A prefix that ends between fields is a valid (shorter) message.
    if (head) {
      EXPECT_TRUE(cut == 9 || cut == 11) << cut;
    }
  }
  EXPECT_FALSE(decode_event_head(unhex("ff")));
}

}  // namespace
}  // namespace meshtrain::tensorboard
