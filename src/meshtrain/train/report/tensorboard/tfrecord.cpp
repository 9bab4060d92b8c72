#include "meshtrain/train/report/tensorboard/tfrecord.hpp"

#include <cstdint>

#include "meshtrain/train/report/tensorboard/crc32c.hpp"

namespace meshtrain::tensorboard {
namespace {

constexpr size_t kHeader = 8 + 4;  // length, its CRC
constexpr size_t kFooter = 4;      // the data's CRC

template <typename T>
void put_le(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

template <typename T>
T get_le(std::string_view bytes) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  return v;
}

}  // namespace

std::string frame_record(std::string_view data) {
  std::string out;
  out.reserve(kHeader + data.size() + kFooter);
  put_le<uint64_t>(out, data.size());
  put_le<uint32_t>(out, masked_crc32c(std::string_view(out.data(), 8)));
  out.append(data);
  put_le<uint32_t>(out, masked_crc32c(data));
  return out;
}

RecordScan scan_records(std::string_view bytes) {
  RecordScan scan;
  size_t at = 0;
  while (bytes.size() - at >= kHeader) {
    const std::string_view length_bytes = bytes.substr(at, 8);
    if (get_le<uint32_t>(bytes.substr(at + 8)) != masked_crc32c(length_bytes)) break;
    const uint64_t length = get_le<uint64_t>(length_bytes);
    if (length > bytes.size() - at - kHeader || bytes.size() - at - kHeader - length < kFooter) break;
    const std::string_view data = bytes.substr(at + kHeader, length);
    if (get_le<uint32_t>(bytes.substr(at + kHeader + length)) != masked_crc32c(data)) break;
    scan.records.push_back(data);
    at += kHeader + length + kFooter;
  }
  scan.valid_bytes = at;
  return scan;
}

}  // namespace meshtrain::tensorboard
