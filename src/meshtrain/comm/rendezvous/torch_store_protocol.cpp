#include "meshtrain/comm/rendezvous/torch_store_protocol.hpp"

namespace meshtrain::comm::rendezvous::torch_store {
namespace {

constexpr uint32_t kValidationMagic = 0x3C85F7CE;
constexpr uint8_t kValidate = 0;              // Current only
constexpr uint8_t kCurrentGetNumKeys = 7;

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_string(std::string& out, std::string_view s) {
  put_u64(out, s.size());
  out.append(s);
}

std::string start(Generation g, Query q) { return std::string(1, static_cast<char>(query_byte(g, q))); }

}  // namespace

const char* generation_name(Generation g) { return g == Generation::Legacy ? "before 2.2" : "2.2 or later"; }

uint8_t query_byte(Generation g, Query q) {
  // Legacy numbering: SET 0, COMPARE_SET 1, GET 2, ADD 3, CHECK 4, WAIT 5.
  uint8_t legacy = 0;
  switch (q) {
    case Query::Set: legacy = 0; break;
    case Query::Get: legacy = 2; break;
    case Query::Wait: legacy = 5; break;
  }
  return g == Generation::Legacy ? legacy : static_cast<uint8_t>(legacy + 1);
}

std::string encode_validate(Generation g) {
  if (g == Generation::Legacy) return "";
  std::string out(1, static_cast<char>(kValidate));
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((kValidationMagic >> (8 * i)) & 0xff));
  return out;
}

std::string encode_set(Generation g, std::string_view key, std::string_view value) {
  std::string out = start(g, Query::Set);
  put_string(out, key);
  put_string(out, value);
  return out;
}

std::string encode_get(Generation g, std::string_view key) {
  std::string out = start(g, Query::Get);
  put_string(out, key);
  return out;
}

std::string encode_wait(Generation g, std::span<const std::string> keys) {
  std::string out = start(g, Query::Wait);
  put_u64(out, keys.size());
  for (const std::string& k : keys) put_string(out, k);
  return out;
}

int64_t decode_int64(std::string_view b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[static_cast<size_t>(i)]);
  return static_cast<int64_t>(v);
}

std::string generation_probe() {
  std::string out = encode_validate(Generation::Current);
  out.append(4, static_cast<char>(kCurrentGetNumKeys));
  return out;
}

}  // namespace meshtrain::comm::rendezvous::torch_store
