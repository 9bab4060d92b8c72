#pragma once
// The wire format shared by the rendezvous store and the TCP transport's
// connection handshake.
//
// Frame: one request or reply, laid out little-endian as
//   u32 magic "MTKV" | u8 type | u32 key_len | u32 value_len | key | value
// The header is kFrameHeaderBytes long. A frame is valid when the magic and
// type are known and key_len, value_len and the whole frame stay within
// FrameLimits; anything else is rejected as soon as its header has arrived, so
// a peer can never make us buffer more than one frame of max_frame bytes.
//
// Hello: the first frame on every connection (store or data plane). Its key is
// the per-job token; its value carries the sender's rank and world size
// (i32 each) followed by the job id. A connection whose Hello does not match
// is dropped.
//
// decode_frame() is a pure function over a byte string, so it can be fuzzed
// (fuzz/frame_decoder_fuzz.cpp) and tested without sockets.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace meshtrain::comm::rendezvous {

enum class FrameType : uint8_t {
  Hello = 1,  // client -> server: authenticate (key = token, value = HelloInfo)
  Set = 2,    // key = name, value = bytes to store
  Get = 3,    // key = name; the reply waits until the key has been set
  Ok = 4,     // reply to Hello or Set
  Value = 5,  // reply to Get: key = name, value = stored bytes
  Error = 6,  // reply: value = message; the connection or job cannot go on
};

inline constexpr uint32_t kFrameMagic = 0x564B544Du;  // "MTKV" read as little-endian
inline constexpr size_t kFrameHeaderBytes = 13;

struct FrameLimits {
  size_t max_key = 1024;
  size_t max_value = size_t{1} << 20;
  size_t max_frame = kFrameHeaderBytes + 1024 + (size_t{1} << 20);
};

struct Frame {
  FrameType type = FrameType::Error;
  std::string_view key;    // views into the decoded buffer
  std::string_view value;
};

enum class DecodeStatus { Incomplete, Complete, Invalid };

struct DecodeResult {
  DecodeStatus status = DecodeStatus::Incomplete;
  size_t consumed = 0;  // bytes of the input the frame used (Complete only)
  size_t needed = 0;    // Incomplete: bytes the whole frame will take, once its header is in
  Frame frame;          // Complete only
  std::string error;    // Invalid only: why, for the log line
};

// Decodes the frame at the start of `bytes`. Incomplete: the header looks
// valid but more bytes are needed. Invalid: the stream is corrupt or hostile
// and the connection must be dropped.
DecodeResult decode_frame(std::string_view bytes, const FrameLimits& limits = {});

std::string encode_frame(FrameType type, std::string_view key, std::string_view value);

std::string_view frame_type_name(FrameType type);

// The value of a Hello frame.
struct HelloInfo {
  int32_t rank = -1;
  int32_t world_size = 0;
  std::string job_id;
};
inline constexpr size_t kMaxJobIdBytes = 256;

std::string encode_hello_value(const HelloInfo& hello);
// nullopt when the value is too short or the job id too long.
std::optional<HelloInfo> parse_hello_value(std::string_view value);

// Compares secrets in time independent of where they first differ.
bool tokens_equal(std::string_view a, std::string_view b);

}  // namespace meshtrain::comm::rendezvous
