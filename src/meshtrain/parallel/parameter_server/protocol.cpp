#include "meshtrain/parallel/parameter_server/protocol.hpp"

#include <cstring>

namespace meshtrain::parallel::ps {
namespace {

constexpr size_t kMaxSecretBytes = 4096;

void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }

bool get_u64(std::string_view& in, uint64_t& v) {
  if (in.size() < sizeof v) return false;
  std::memcpy(&v, in.data(), sizeof v);
  in.remove_prefix(sizeof v);
  return true;
}

bool get_string(std::string_view& in, std::string& s) {
  uint64_t n = 0;
  if (!get_u64(in, n) || n > kMaxSecretBytes || n > in.size()) return false;
  s.assign(in.data(), n);
  in.remove_prefix(n);
  return true;
}

}  // namespace

std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::Hello: return "Hello";
    case Kind::Welcome: return "Welcome";
    case Kind::Pull: return "Pull";
    case Kind::Params: return "Params";
    case Kind::Push: return "Push";
    case Kind::Ack: return "Ack";
    case Kind::Done: return "Done";
    case Kind::Finish: return "Finish";
    case Kind::Shard: return "Shard";
    case Kind::Error: return "Error";
  }
  return "unknown";
}

std::optional<Header> decode_header(std::string_view bytes, std::string& error) {
  if (bytes.size() < kHeaderBytes) {
    error = "short header";
    return std::nullopt;
  }
  Header h;
  std::memcpy(&h, bytes.data(), kHeaderBytes);
  if (h.magic != kMagic) {
    error = "bad magic (not a meshtrain parameter-server peer)";
    return std::nullopt;
  }
  if (static_cast<uint8_t>(h.kind) < static_cast<uint8_t>(Kind::Hello) ||
      static_cast<uint8_t>(h.kind) > static_cast<uint8_t>(Kind::Error)) {
    error = "unknown message kind " + std::to_string(static_cast<int>(h.kind));
    return std::nullopt;
  }
  if (h.payload_bytes > kMaxPayloadBytes) {
    error = "payload of " + std::to_string(h.payload_bytes) + " bytes is over the limit";
    return std::nullopt;
  }
  return h;
}

Header make_header(Kind kind, int32_t rank, int64_t step, int64_t clock, uint64_t payload_bytes) {
  Header h;
  h.kind = kind;
  h.rank = rank;
  h.step = step;
  h.clock = clock;
  h.payload_bytes = payload_bytes;
  return h;
}

std::string encode_message(Kind kind, int32_t rank, int64_t step, int64_t clock, std::string_view payload) {
  const Header h = make_header(kind, rank, step, clock, payload.size());
  std::string out(kHeaderBytes + payload.size(), '\0');
  std::memcpy(out.data(), &h, kHeaderBytes);
  if (!payload.empty()) std::memcpy(out.data() + kHeaderBytes, payload.data(), payload.size());
  return out;
}

std::string encode_hello(const HelloPayload& hello) {
  std::string out;
  put_u64(out, hello.token.size());
  out += hello.token;
  put_u64(out, hello.job_id.size());
  out += hello.job_id;
  put_u64(out, static_cast<uint64_t>(static_cast<uint32_t>(hello.world_size)));
  put_u64(out, hello.begin);
  put_u64(out, hello.end);
  put_u64(out, hello.flat_size);
  return out;
}

std::optional<HelloPayload> decode_hello(std::string_view in) {
  HelloPayload h;
  uint64_t world = 0;
  if (!get_string(in, h.token) || !get_string(in, h.job_id) || !get_u64(in, world) || !get_u64(in, h.begin) ||
      !get_u64(in, h.end) || !get_u64(in, h.flat_size) || !in.empty() || world > (uint64_t{1} << 30))
    return std::nullopt;
  h.world_size = static_cast<int32_t>(world);
  return h;
}

}  // namespace meshtrain::parallel::ps
