#include "meshtrain/data/idx.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "meshtrain/core/error.hpp"

namespace meshtrain {

namespace fs = std::filesystem;

namespace {

constexpr uint8_t kDtypeUbyte = 0x08;
// Largest element count we accept: far above Fashion-MNIST's 47 M, far below
// anything that would overflow the size arithmetic.
constexpr int64_t kMaxElements = int64_t{1} << 36;

// zlib's gzread reads gzip streams and, "transparently", plain files too, so
// one code path serves both forms.
class GzFile {
 public:
  explicit GzFile(const fs::path& path) : path_(path) {
    file_ = gzopen(path.c_str(), "rb");
    if (!file_)
      throw DataError("IDX file " + path.string() + " cannot be opened: " +
                      (errno ? std::strerror(errno) : "out of memory"));
  }
  ~GzFile() { gzclose(file_); }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  // Reads up to n bytes; fewer only at the end of the data. A corrupt or
  // truncated gzip stream throws rather than looking like a short file.
  size_t read(void* out, size_t n) {
    size_t total = 0;
    while (total < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - total, 1u << 30));
      const int got = gzread(file_, static_cast<char*>(out) + total, chunk);
      if (got < 0) fail_with_zlib_error();
      if (got == 0) break;
      total += static_cast<size_t>(got);
    }
    // gzread may report a truncated gzip stream only through gzerror after
    // returning the bytes it could decode.
    int code = Z_OK;
    gzerror(file_, &code);
    if (code != Z_OK && code != Z_STREAM_END) fail_with_zlib_error();
    return total;
  }

 private:
  [[noreturn]] void fail_with_zlib_error() {
    int code = Z_OK;
    const char* message = gzerror(file_, &code);
    std::string why = code == Z_ERRNO ? std::strerror(errno) : message ? message : "unknown zlib error";
    // zlib prefixes its message with the path, which ours already names.
    const std::string prefix = path_.string() + ": ";
    if (why.starts_with(prefix)) why.erase(0, prefix.size());
    throw DataError("IDX file " + path_.string() + " is corrupt or truncated: " + why);
  }

  fs::path path_;
  gzFile file_ = nullptr;
};

std::string hex_byte(uint8_t byte) {
  char hex[5];
  std::snprintf(hex, sizeof hex, "0x%02X", byte);
  return hex;
}

}  // namespace

IdxArray read_idx(const fs::path& path) {
  const std::string name = path.string();
  if (!fs::exists(path)) throw DataError("IDX file " + name + " does not exist");
  if (fs::is_directory(path)) throw DataError("IDX file " + name + " is a directory, not a file");
  GzFile file(path);

  uint8_t magic[4];
  if (file.read(magic, 4) != 4)
    throw DataError("IDX file " + name + " is truncated: shorter than its 4-byte magic number");
  if (magic[0] != 0 || magic[1] != 0 || magic[3] == 0)
    throw DataError("IDX file " + name + " has a bad magic number (bytes " +
                    std::to_string(magic[0]) + " " + std::to_string(magic[1]) + " " +
                    std::to_string(magic[2]) + " " + std::to_string(magic[3]) +
                    "; expected 0 0 dtype ndims with ndims >= 1)");
  if (magic[2] != kDtypeUbyte)
    throw DataError("IDX file " + name + " has dtype " + hex_byte(magic[2]) +
                    "; only unsigned byte (0x08) is supported");

  IdxArray array;
  const int ndims = magic[3];
  int64_t count = 1;
  for (int d = 0; d < ndims; ++d) {
    uint8_t be[4];
    if (file.read(be, 4) != 4)
      throw DataError("IDX file " + name + " is truncated inside its header (" +
                      std::to_string(ndims) + " dims promised)");
    const int64_t dim = (int64_t{be[0]} << 24) | (int64_t{be[1]} << 16) | (int64_t{be[2]} << 8) | be[3];
    if (dim == 0) throw DataError("IDX file " + name + " has dim " + std::to_string(d) + " = 0");
    // Checked before multiplying, so the product itself cannot overflow.
    if (dim > kMaxElements / count)
      throw DataError("IDX file " + name + " claims more than 2^36 elements; refusing to read it");
    count *= dim;
    array.dims.push_back(dim);
  }

  // Grow the buffer with the data actually read, so a header promising more
  // than the file holds fails on the short read, not on a giant allocation.
  constexpr size_t kChunk = size_t{1} << 24;
  size_t have = 0;
  while (have < static_cast<size_t>(count)) {
    const size_t want = std::min(kChunk, static_cast<size_t>(count) - have);
    array.data.resize(have + want);
    const size_t got = file.read(array.data.data() + have, want);
    have += got;
    if (got < want)
      throw DataError("IDX file " + name + " is truncated: header promises " +
                      std::to_string(count) + " data bytes, file holds " + std::to_string(have));
  }
  uint8_t extra;
  if (file.read(&extra, 1) != 0)
    throw DataError("IDX file " + name + " has bytes after the " + std::to_string(count) +
                    " its header promises");
  return array;
}

}  // namespace meshtrain
