#include "meshtrain/comm/rendezvous/frame.hpp"

#include <cstring>

namespace meshtrain::comm::rendezvous {
namespace {

uint32_t load_u32(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
}

void store_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

bool known_type(uint8_t t) {
  return t >= static_cast<uint8_t>(FrameType::Hello) && t <= static_cast<uint8_t>(FrameType::Error);
}

DecodeResult invalid(std::string why) {
  DecodeResult r;
  r.status = DecodeStatus::Invalid;
  r.error = std::move(why);
  return r;
}

}  // namespace

DecodeResult decode_frame(std::string_view bytes, const FrameLimits& limits) {
  DecodeResult r;
  // Check the magic as soon as its first bytes arrive, so a stray client
  // (an HTTP probe, say) is dropped without waiting for a full header.
  const char magic[4] = {'M', 'T', 'K', 'V'};
  const size_t seen = bytes.size() < 4 ? bytes.size() : 4;
  if (seen > 0 && std::memcmp(bytes.data(), magic, seen) != 0) return invalid("bad magic (not a meshtrain peer?)");
  r.needed = kFrameHeaderBytes;
  if (bytes.size() < kFrameHeaderBytes) return r;

  const auto type = static_cast<uint8_t>(bytes[4]);
  const uint64_t key_len = load_u32(bytes.data() + 5);
  const uint64_t value_len = load_u32(bytes.data() + 9);
  if (!known_type(type)) return invalid("unknown frame type " + std::to_string(type));
  if (key_len > limits.max_key)
    return invalid("key of " + std::to_string(key_len) + " bytes exceeds the limit of " +
                   std::to_string(limits.max_key));
  if (value_len > limits.max_value)
    return invalid("value of " + std::to_string(value_len) + " bytes exceeds the limit of " +
                   std::to_string(limits.max_value));
  const uint64_t total = kFrameHeaderBytes + key_len + value_len;  // no overflow: each < 2^32
  if (total > limits.max_frame)
    return invalid("frame of " + std::to_string(total) + " bytes exceeds the limit of " +
                   std::to_string(limits.max_frame));
  r.needed = static_cast<size_t>(total);
  if (bytes.size() < total) return r;

  r.status = DecodeStatus::Complete;
  r.consumed = static_cast<size_t>(total);
  r.frame.type = static_cast<FrameType>(type);
  r.frame.key = bytes.substr(kFrameHeaderBytes, static_cast<size_t>(key_len));
  r.frame.value = bytes.substr(kFrameHeaderBytes + key_len, static_cast<size_t>(value_len));
  return r;
}

std::string encode_frame(FrameType type, std::string_view key, std::string_view value) {
  std::string out;
  out.reserve(kFrameHeaderBytes + key.size() + value.size());
  store_u32(out, kFrameMagic);
  out.push_back(static_cast<char>(type));
  store_u32(out, static_cast<uint32_t>(key.size()));
  store_u32(out, static_cast<uint32_t>(value.size()));
  out.append(key);
  out.append(value);
  return out;
}

std::string_view frame_type_name(FrameType type) {
  switch (type) {
    case FrameType::Hello: return "hello";
    case FrameType::Set: return "set";
    case FrameType::Get: return "get";
    case FrameType::Ok: return "ok";
    case FrameType::Value: return "value";
    case FrameType::Error: return "error";
  }
  return "?";
}

std::string encode_hello_value(const HelloInfo& hello) {
  std::string out;
  store_u32(out, static_cast<uint32_t>(hello.rank));
  store_u32(out, static_cast<uint32_t>(hello.world_size));
  out.append(hello.job_id);
  return out;
}

std::optional<HelloInfo> parse_hello_value(std::string_view value) {
  if (value.size() < 8 || value.size() - 8 > kMaxJobIdBytes) return std::nullopt;
  HelloInfo hello;
  hello.rank = static_cast<int32_t>(load_u32(value.data()));
  hello.world_size = static_cast<int32_t>(load_u32(value.data() + 4));
  hello.job_id = std::string(value.substr(8));
  return hello;
}

bool tokens_equal(std::string_view a, std::string_view b) {
  // Touch every byte of the longer string, so timing leaks only the length.
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned diff = a.size() != b.size() ? 1u : 0u;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

}  // namespace meshtrain::comm::rendezvous
