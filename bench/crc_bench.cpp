// CRC throughput on one large buffer, the two choices behind the code:
//   CRC-32 (checkpoint manifests): the slicing-by-8 table checkpoint/crc32.cpp
//     had, against zlib's crc32_z it calls now;
//   CRC-32C (TensorBoard's TFRecord framing): the table against the SSE4.2
//     instruction (train/report/tensorboard/crc32c.cpp picks it at run time).
// Usage: bench_crc [MiB=256] [rounds=5]. Rounds alternate the versions; each
// line is GB/s per round, then the median. Every version must agree on the CRC.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "meshtrain/checkpoint/crc32.hpp"
#include "meshtrain/train/report/tensorboard/crc32c.hpp"

namespace {

// The table checkpoint/crc32.cpp used before it called zlib (git ad5f7d2^).
using Tables = std::array<std::array<uint32_t, 256>, 8>;
Tables make_tables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
    t[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; ++b)
    for (size_t k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  return t;
}
const Tables kTables = make_tables();

uint32_t table_crc32(uint32_t crc, const void* data, size_t bytes) {
  const auto& t = kTables;
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  for (; bytes >= 8; bytes -= 8, p += 8) {
    uint32_t lo = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
    lo ^= c;
    c = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^ t[3][p[4]] ^
        t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]];
  }
  while (bytes-- > 0) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xFF];
  return ~c;
}

struct Version {
  const char* name;
  uint32_t (*crc)(uint32_t, const void*, size_t);
  std::vector<double> gbps;
  uint32_t value = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  std::vector<uint8_t> buf(mib << 20);
  uint64_t x = 88172645463325252ull;  // xorshift: bytes no table or branch predictor can guess
  for (auto& b : buf) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
  std::vector<Version> crc32 = {{"crc32 slicing-by-8 table", table_crc32, {}},
                                {"crc32 zlib crc32_z", meshtrain::checkpoint::crc32_update, {}}};
  std::vector<Version> crc32c = {{"crc32c slicing-by-8 table", meshtrain::tensorboard::crc32c_portable, {}},
                                 {"crc32c dispatched", meshtrain::tensorboard::crc32c, {}}};
  std::printf("%zu MiB, %d rounds; crc32c dispatches to %s\n", mib, rounds,
              meshtrain::tensorboard::crc32c_uses_sse42() ? "SSE4.2 crc32" : "the table");
  for (int r = 0; r < rounds; ++r)
    for (auto* group : {&crc32, &crc32c})
      for (Version& v : *group) {
        const auto t0 = std::chrono::steady_clock::now();
        v.value = v.crc(0, buf.data(), buf.size());
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        v.gbps.push_back(double(buf.size()) / s / 1e9);
      }
  int status = 0;
  for (auto* group : {&crc32, &crc32c}) {
    for (Version& v : *group) {
      std::string line;
      for (double g : v.gbps) {
        char field[16];
        std::snprintf(field, sizeof field, " %.3g", g);
        line += field;
      }
      std::vector<double> sorted = v.gbps;
      std::sort(sorted.begin(), sorted.end());
      std::printf("%-28s GB/s:%s | median %.2f | crc %08x\n", v.name, line.c_str(), sorted[sorted.size() / 2],
                  v.value);
    }
    if ((*group)[0].value != (*group)[1].value) status = 1;
  }
  if (status) std::printf("MISMATCH: versions disagree\n");
  return status;
}
