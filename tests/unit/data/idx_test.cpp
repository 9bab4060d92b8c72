#include "meshtrain/data/idx.hpp"

#include <gtest/gtest.h>

#include "meshtrain/core/error.hpp"
#include "test_files.hpp"

namespace meshtrain {
namespace {

using testing::idx_bytes;
using testing::TempDir;
using testing::write_bytes;
using testing::write_gz;

std::vector<uint8_t> iota_bytes(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 7);
  return v;
}

std::string idx_error(const std::filesystem::path& path) {
  try {
    read_idx(path);
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no DataError thrown)";
}

TEST(ReadIdx, ReadsPlainAndGzippedFilesAlike) {
  TempDir dir;
  const auto data = iota_bytes(3 * 4 * 5);
  const auto file = idx_bytes({3, 4, 5}, data);
  write_bytes(dir / "a.idx", file);
  write_gz(dir / "a.idx.gz", file);
  for (const char* name : {"a.idx", "a.idx.gz"}) {
    const IdxArray array = read_idx(dir / name);
    EXPECT_EQ(array.dims, (std::vector<int64_t>{3, 4, 5})) << name;
    EXPECT_EQ(array.data, data) << name;
  }
}

TEST(ReadIdx, GzipIsDetectedByContentNotName) {
  TempDir dir;
  const auto data = iota_bytes(6);
  write_gz(dir / "labels.bin", idx_bytes({6}, data));
  EXPECT_EQ(read_idx(dir / "labels.bin").data, data);
}

TEST(ReadIdx, BigEndianDimsAboveOneByte) {
  TempDir dir;
  const auto data = iota_bytes(300);
  write_gz(dir / "a.gz", idx_bytes({300}, data));
  EXPECT_EQ(read_idx(dir / "a.gz").dims, (std::vector<int64_t>{300}));
}

TEST(ReadIdx, TruncatedDataIsAnError) {
  TempDir dir;
  auto file = idx_bytes({10, 10}, iota_bytes(100));
  file.resize(file.size() - 1);  // one data byte short
  write_bytes(dir / "short.idx", file);
  write_gz(dir / "short.idx.gz", file);
  for (const char* name : {"short.idx", "short.idx.gz"}) {
    const std::string message = idx_error(dir / name);
    EXPECT_NE(message.find("truncated"), std::string::npos) << message;
    EXPECT_NE(message.find(name), std::string::npos) << message;
  }
}

TEST(ReadIdx, HeaderPromisingHugeDataFailsWithoutAllocatingIt) {
  TempDir dir;
  // 60000 x 28 x 28 promised, 10 bytes present.
  write_gz(dir / "liar.gz", idx_bytes({60000, 28, 28}, iota_bytes(10)));
  EXPECT_NE(idx_error(dir / "liar.gz").find("truncated"), std::string::npos);
  // 2^32-1 cubed: more than we accept at all.
  write_bytes(dir / "huge.idx", idx_bytes({0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, {}));
  EXPECT_THROW(read_idx(dir / "huge.idx"), DataError);
}

TEST(ReadIdx, TruncatedHeaderOrEmptyFile) {
  TempDir dir;
  write_bytes(dir / "empty.idx", {});
  EXPECT_NE(idx_error(dir / "empty.idx").find("truncated"), std::string::npos);
  auto file = idx_bytes({10, 10}, {});
  file.resize(6);  // inside the first dim
  write_bytes(dir / "header.idx", file);
  EXPECT_NE(idx_error(dir / "header.idx").find("header"), std::string::npos);
}

TEST(ReadIdx, CutGzipStreamIsAnError) {
  TempDir dir;
  write_gz(dir / "full.gz", idx_bytes({50, 50}, iota_bytes(2500)));
  std::ifstream in(dir / "full.gz", std::ios::binary);
  std::vector<uint8_t> gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  gz.resize(gz.size() / 2);  // the gzip stream itself ends early
  write_bytes(dir / "cut.gz", gz);
  EXPECT_THROW(read_idx(dir / "cut.gz"), DataError);
}

TEST(ReadIdx, TrailingBytesAreAnError) {
  TempDir dir;
  auto file = idx_bytes({4}, iota_bytes(4));
  file.push_back(0);
  write_bytes(dir / "long.idx", file);
  EXPECT_NE(idx_error(dir / "long.idx").find("after"), std::string::npos);
}

TEST(ReadIdx, BadMagicNumber) {
  TempDir dir;
  auto file = idx_bytes({4}, iota_bytes(4));
  file[0] = 1;
  write_bytes(dir / "magic.idx", file);
  EXPECT_NE(idx_error(dir / "magic.idx").find("magic"), std::string::npos);
  write_bytes(dir / "text.idx", {'h', 'e', 'l', 'l', 'o', '\n'});
  EXPECT_NE(idx_error(dir / "text.idx").find("magic"), std::string::npos);
  write_bytes(dir / "nodims.idx", {0, 0, 8, 0});
  EXPECT_NE(idx_error(dir / "nodims.idx").find("magic"), std::string::npos);
}

TEST(ReadIdx, OnlyUnsignedByteDtype) {
  TempDir dir;
  write_bytes(dir / "float.idx", idx_bytes({1}, {0, 0, 0, 0}, 0x0D));
  const std::string message = idx_error(dir / "float.idx");
  EXPECT_NE(message.find("0x0D"), std::string::npos) << message;
}

TEST(ReadIdx, ZeroDimIsAnError) {
  TempDir dir;
  write_bytes(dir / "zero.idx", idx_bytes({0, 28}, {}));
  EXPECT_THROW(read_idx(dir / "zero.idx"), DataError);
}

TEST(ReadIdx, MissingFile) {
  TempDir dir;
  const std::string message = idx_error(dir / "absent.gz");
  EXPECT_NE(message.find("does not exist"), std::string::npos) << message;
}

}  // namespace
}  // namespace meshtrain
