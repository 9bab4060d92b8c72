#pragma once
// CRC-32 (IEEE 802.3, the polynomial of zlib, gzip and PNG), so a checksum in
// a checkpoint manifest can be checked by hand with any standard tool, e.g.
// python3 -c "import zlib,sys; print('%08x' % zlib.crc32(open(sys.argv[1],'rb').read()))" FILE
#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace meshtrain::checkpoint {

// Continues a CRC: crc32_update(crc32_update(0, a), b) == CRC of a followed by b.
uint32_t crc32_update(uint32_t crc, const void* data, size_t bytes);
// CRC and size of a whole file, read in chunks; throws IoError.
struct FileDigest {
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};
FileDigest digest_file(const std::filesystem::path& path);

}  // namespace meshtrain::checkpoint
