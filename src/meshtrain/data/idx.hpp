#pragma once
// Reader for IDX files, the format of MNIST and Fashion-MNIST, gzipped or plain.
//
// Layout: a 4-byte magic number {0, 0, dtype, ndims}, then ndims big-endian
// uint32 dims, then prod(dims) elements row-major. Only dtype 0x08 (unsigned
// byte) is supported; it is all (Fashion-)MNIST uses.
#include <cstdint>
#include <filesystem>
#include <vector>

namespace meshtrain {

struct IdxArray {
  std::vector<int64_t> dims;   // outermost first, e.g. (60000, 28, 28)
  std::vector<uint8_t> data;   // prod(dims) bytes, row-major
};

// Reads a .gz (detected by its content, not its name) or a plain IDX file.
// Throws DataError naming the path for a missing file, a bad magic number, an
// unsupported dtype, a zero dim, a file shorter than its header promises
// (checked as it is read, so a lying header cannot cause an out-of-bounds read
// or a huge allocation), trailing bytes after the data, or a corrupt gzip stream.
IdxArray read_idx(const std::filesystem::path& path);

}  // namespace meshtrain
