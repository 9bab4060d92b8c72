#pragma once
// Small files for data tests, written into a fresh temporary directory that is
// removed when the test ends.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "meshtrain/core/error.hpp"

namespace meshtrain::testing {

// The message of the DataError f() throws, or "(no DataError)".
template <class F>
std::string data_error(F&& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no DataError)";
}

class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    // Test name plus pid: unique across parallel ctest runs of this binary.
    path_ = std::filesystem::temp_directory_path() /
            ("meshtrain_data_" + std::string(info ? info->name() : "test") + "_" +
             std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  write_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

// Through zlib's gzip writer, as Debian's .gz files are.
inline void write_gz(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << path;
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
  }
  ASSERT_EQ(gzclose(file), Z_OK);
}

// An IDX file image: magic {0, 0, dtype, ndims}, big-endian dims, then data.
inline std::vector<uint8_t> idx_bytes(const std::vector<uint32_t>& dims,
                                      const std::vector<uint8_t>& data, uint8_t dtype = 0x08) {
  std::vector<uint8_t> out = {0, 0, dtype, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(d >> shift));
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

}  // namespace meshtrain::testing
