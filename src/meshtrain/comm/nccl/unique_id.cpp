#include "meshtrain/comm/nccl/unique_id.hpp"

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::nccl {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string encode_unique_id(std::span<const unsigned char> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  text.reserve(2 * bytes.size());
  for (unsigned char b : bytes) {
    text.push_back(kDigits[b >> 4]);
    text.push_back(kDigits[b & 15]);
  }
  return text;
}

std::vector<unsigned char> decode_unique_id(std::string_view text, size_t size, std::string_view key) {
  auto bad = [&](const std::string& why) {
    return CommError("NCCL unique id under rendezvous key '" + std::string(key) + "': " + why +
                     " (a value left by another job, or a store shared by two jobs)");
  };
  if (text.size() != 2 * size)
    throw bad(std::to_string(text.size()) + " characters, expected " + std::to_string(2 * size));
  std::vector<unsigned char> bytes(size);
  for (size_t i = 0; i < size; ++i) {
    const int hi = hex_value(text[2 * i]), lo = hex_value(text[2 * i + 1]);
    if (hi < 0 || lo < 0) throw bad("character " + std::to_string(2 * i) + " is not lower-case hexadecimal");
    bytes[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  return bytes;
}

std::vector<unsigned char> share_unique_id(rendezvous::KeyValueStore& store, std::string_view key, int rank,
                                           size_t size, const std::function<std::vector<unsigned char>()>& make_id) {
  if (rank == 0) {
    std::vector<unsigned char> id = make_id();
    if (id.size() != size)
      throw Error("share_unique_id: made " + std::to_string(id.size()) + " bytes, expected " + std::to_string(size));
    store.set(key, encode_unique_id(id));
    return id;
  }
  return decode_unique_id(store.get(key), size, key);
}

}  // namespace meshtrain::comm::nccl
