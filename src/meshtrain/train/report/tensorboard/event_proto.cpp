#include "meshtrain/train/report/tensorboard/event_proto.hpp"

#include <bit>

namespace meshtrain::tensorboard {
namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Event, Summary and Value field numbers.
constexpr uint32_t kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5;
constexpr uint32_t kSummaryValue = 1;
constexpr uint32_t kTag = 1, kSimpleValue = 2;

void put_varint(std::string& out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>((v & 0x7F) | 0x80));
  out.push_back(static_cast<char>(v));
}

void put_key(std::string& out, uint32_t field, WireType type) { put_varint(out, (uint64_t(field) << 3) | type); }

template <typename T>
void put_fixed(std::string& out, T bits) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
}

void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

void put_wall_time(std::string& out, double wall_time) {
  put_key(out, kWallTime, kFixed64);
  put_fixed(out, std::bit_cast<uint64_t>(wall_time));
}

// Reads a varint at `at`, advancing it; nullopt past the end or over 10 bytes.
std::optional<uint64_t> get_varint(std::string_view bytes, size_t& at) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64 && at < bytes.size(); shift += 7) {
    const auto byte = static_cast<unsigned char>(bytes[at++]);
    v |= uint64_t(byte & 0x7F) << shift;
    if (!(byte & 0x80)) return v;
  }
  return std::nullopt;
}

}  // namespace

std::string encode_file_version_event(double wall_time) {
  std::string event;
  put_wall_time(event, wall_time);
  put_bytes(event, kFileVersion, "brain.Event:2");
  return event;
}

std::string encode_scalar_event(double wall_time, int64_t step, const std::vector<Scalar>& scalars) {
  std::string summary;
  for (const Scalar& s : scalars) {
    std::string value;
    put_bytes(value, kTag, s.tag);
    // In a oneof, so written even when 0: without it the value is no scalar.
    put_key(value, kSimpleValue, kFixed32);
    put_fixed(value, std::bit_cast<uint32_t>(s.value));
    put_bytes(summary, kSummaryValue, value);
  }
  std::string event;
  put_wall_time(event, wall_time);
  if (step != 0) {  // proto3 leaves a default out
    put_key(event, kStep, kVarint);
    put_varint(event, static_cast<uint64_t>(step));  // two's complement, as protobuf's int64
  }
  put_bytes(event, kSummary, summary);
  return event;
}

std::optional<EventHead> decode_event_head(std::string_view bytes) {
  EventHead head;
  size_t at = 0;
  while (at < bytes.size()) {
    const auto key = get_varint(bytes, at);
    if (!key) return std::nullopt;
    const auto field = static_cast<uint32_t>(*key >> 3);
    switch (static_cast<uint32_t>(*key & 7)) {
      case kVarint: {
        const auto v = get_varint(bytes, at);
        if (!v) return std::nullopt;
        if (field == kStep) head.step = static_cast<int64_t>(*v);
        break;
      }
      case kFixed64:
        if (bytes.size() - at < 8) return std::nullopt;
        at += 8;
        break;
      case kLengthDelimited: {
        const auto n = get_varint(bytes, at);
        if (!n || *n > bytes.size() - at) return std::nullopt;
        at += *n;
        if (field == kSummary) head.has_summary = true;
        break;
      }
      case kFixed32:
        if (bytes.size() - at < 4) return std::nullopt;
        at += 4;
        break;
      default:  // groups (3, 4) and reserved types: not in an Event
        return std::nullopt;
    }
  }
  return head;
}

}  // namespace meshtrain::tensorboard
