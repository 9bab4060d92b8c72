#include "meshtrain/checkpoint/crc32.hpp"

#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <vector>

#include "meshtrain/checkpoint/durable_io.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::checkpoint {

// zlib's (it ships with the build for the data layer): its braided CRC
// measured at least as fast as the slicing-by-8 table this replaced
// (bench/RESULTS.md, "CRC-32"), and one CRC implementation fewer to keep.
uint32_t crc32_update(uint32_t crc, const void* data, size_t bytes) {
  return static_cast<uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(data), bytes));
}

FileDigest digest_file(const std::filesystem::path& path) {
  Fd fd = Fd::open_read(path);
  std::vector<char> chunk(1 << 20);
  FileDigest d;
  for (;;) {
    ssize_t n = ::read(fd.get(), chunk.data(), chunk.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IoError(errno_text("read", path));
    }
    if (n == 0) break;
    d.crc32 = crc32_update(d.crc32, chunk.data(), static_cast<size_t>(n));
    d.bytes += static_cast<uint64_t>(n);
  }
  return d;
}

}  // namespace meshtrain::checkpoint
