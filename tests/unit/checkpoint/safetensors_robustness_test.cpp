// The reader against hostile and damaged files: every malformation is a
// CheckpointError naming the file, never a crash or an out-of-bounds read
// (run under MESHTRAIN_SANITIZE=ON to make the second half checkable).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "meshtrain/checkpoint/safetensors_reader.hpp"
#include "meshtrain/checkpoint/safetensors_writer.hpp"
#include "meshtrain/core/error.hpp"
#include "temp_dir.hpp"

namespace meshtrain::checkpoint {
namespace {

using testing::TempDir;

// Opens the file and reads every tensor it claims to have.
void open_and_read_all(const std::filesystem::path& path) {
  SafetensorsReader reader(path);
  for (const TensorInfo& t : reader.tensors()) {
    std::vector<std::byte> out(t.bytes());
    reader.read(t.name, t.dtype, t.shape, out);
  }
}

std::string small_file_bytes(const TempDir& tmp) {
  const std::vector<float> a = {1, 2, 3};
  const std::vector<int64_t> b = {4, 5};
  const std::vector<uint8_t> c = {6};
  std::vector<TensorEntry> entries = {tensor_entry<float>("a", {3}, a), tensor_entry<int64_t>("b", {2, 1}, b),
                                      tensor_entry<uint8_t>("c", {1}, c)};
  write_safetensors(tmp / "small.safetensors", entries, {{"m", "v"}});
  return testing::read_bytes(tmp / "small.safetensors");
}

TEST(SafetensorsRobustness, HeaderLengthBeyondTheFile) {
  TempDir tmp;
  std::string bytes = testing::safetensors_bytes("{}      ", "");
  bytes[0] = static_cast<char>(200);  // claims 200 header bytes; the file has 8 after the length
  testing::write_bytes(tmp / "long.safetensors", bytes);
  try {
    SafetensorsReader reader(tmp / "long.safetensors");
    FAIL() << "accepted";
  } catch (const CheckpointError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("long.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find("header length 200"), std::string::npos) << msg;
  }
}

TEST(SafetensorsRobustness, HeaderLengthOverTheLimit) {
  TempDir tmp;
  std::string bytes = testing::safetensors_bytes("{}      ", "");
  bytes[5] = 1;  // 2^40 bytes
  testing::write_bytes(tmp / "huge.safetensors", bytes);
  EXPECT_THROW(SafetensorsReader(tmp / "huge.safetensors"), CheckpointError);
}

struct BadHeader {
  const char* what;
  std::string header;
  size_t data_bytes;
  const char* message;  // a fragment the error must contain
};

TEST(SafetensorsRobustness, MalformedHeadersAreRejectedWithAReason) {
  const std::string t4 = R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  const std::vector<BadHeader> cases = {
      {"not JSON", R"({"a":)", 0, "not valid JSON"},
      {"root not object", "[1]", 0, "start with '{'"},
      {"root scalar after brace check", R"({"a":1} x)", 0, "not valid JSON"},
      {"entry not object", R"({"a":5})", 0, "not an object"},
      {"unknown dtype", R"({"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", 4, "unknown dtype 'F33'"},
      {"dtype not string", R"({"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", 4, "dtype is not a string"},
      {"size mismatch", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4, "span 4"},
      {"negative dim", R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4, "not a dimension"},
      {"fractional dim", R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4, "not a dimension"},
      {"dim past int64", R"({"a":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,4]}})", 4,
       "not a dimension"},
      {"numel overflow", R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})", 4,
       "overflows"},
      {"bytes overflow", R"({"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,4]}})", 4,
       "overflows"},
      {"end past data", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4, "past the data section"},
      {"begin after end", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", 4, "> end"},
      {"negative offset", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 4, "data_offsets"},
      {"three offsets", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", 4, "data_offsets"},
      {"overlap", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       12, "overlaps"},
      {"hole", R"({"a":)" + t4 + R"(,"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", 12, "hole of 4 bytes"},
      {"hole at start", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8, "hole"},
      {"trailing garbage", R"({"a":)" + t4 + "}", 8, "trailing data"},
      {"duplicate name", R"({"a":)" + t4 + R"(,"a":)" + t4 + "}", 4, "twice"},
      {"extra field", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", 4, "exactly the fields"},
      {"missing field", R"({"a":{"dtype":"F32","shape":[1]}})", 4, "exactly the fields"},
      {"metadata value not string", R"({"__metadata__":{"k":1}})", 0, "not a string"},
      {"metadata not object", R"({"__metadata__":["k"]})", 0, "__metadata__ is not an object"},
      {"deep nesting", R"({"a":{"dtype":"F32","shape":[[[[[1]]]]],"data_offsets":[0,4]}})", 4, "deeper"},
      {"invalid UTF-8", "{\"\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "not valid JSON"},
      {"empty header", "", 0, "start with '{'"},
  };
  TempDir tmp;
  for (const BadHeader& c : cases) {
    const auto path = tmp / "bad.safetensors";
    testing::write_bytes(path, testing::safetensors_bytes(c.header, std::string(c.data_bytes, '\0')));
    try {
      open_and_read_all(path);
      ADD_FAILURE() << c.what << ": accepted";
    } catch (const CheckpointError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(c.message), std::string::npos) << c.what << ": " << msg;
      EXPECT_NE(msg.find("bad.safetensors"), std::string::npos) << c.what << ": " << msg;
    }
  }
}

TEST(SafetensorsRobustness, ZeroSizeTensorsMayShareAnOffset) {
  TempDir tmp;
  const std::string header =
      R"({"e":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
      R"("z":{"dtype":"I64","shape":[2,0],"data_offsets":[4,4]}})";
  testing::write_bytes(tmp / "z.safetensors", testing::safetensors_bytes(header, std::string(4, '\0')));
  EXPECT_NO_THROW(open_and_read_all(tmp / "z.safetensors"));
}

TEST(SafetensorsRobustness, EveryTruncationIsRejected) {
  TempDir tmp;
  const std::string bytes = small_file_bytes(tmp);
  const auto path = tmp / "cut.safetensors";
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    testing::write_bytes(path, bytes.substr(0, cut));
    EXPECT_THROW(open_and_read_all(path), CheckpointError) << "cut at " << cut << " of " << bytes.size();
  }
  testing::write_bytes(path, bytes + "x");
  EXPECT_THROW(open_and_read_all(path), CheckpointError) << "one extra byte";
  testing::write_bytes(path, bytes);
  EXPECT_NO_THROW(open_and_read_all(path));
}

// Random damage, fixed seed: most iterations flip bits or overwrite bytes in
// the length and header (where the parsing is), some anywhere. The only
// allowed outcomes are success or CheckpointError.
TEST(SafetensorsRobustness, RandomCorruptionOnlyEverThrowsCheckpointError) {
  TempDir tmp;
  const std::string original = small_file_bytes(tmp);
  uint64_t header_end = 8;
  for (int i = 0; i < 8; ++i) header_end += static_cast<uint64_t>(static_cast<uint8_t>(original[i])) << (8 * i);
  const auto path = tmp / "fuzz.safetensors";
  std::mt19937_64 rng(20240611);
  int accepted = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bytes = original;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t limit = (rng() % 8 == 0) ? bytes.size() : header_end;
      const size_t pos = rng() % limit;
      switch (rng() % 4) {
        case 0: bytes[pos] = static_cast<char>(bytes[pos] ^ (1 << (rng() % 8))); break;
        case 1: bytes[pos] = static_cast<char>(rng() % 256); break;
        case 2: bytes[pos] = "{}[]\",:0123456789 -eE"[rng() % 21]; break;  // JSON-ish bytes
        default: bytes.erase(pos, 1 + rng() % 3); break;
      }
    }
    testing::write_bytes(path, bytes);
    try {
      open_and_read_all(path);
      ++accepted;
    } catch (const CheckpointError&) {
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "iteration " << iter << ": unexpected exception " << e.what();
    }
  }
  EXPECT_GT(rejected, 2000);  // nearly every edit breaks something checkable
  RecordProperty("accepted", accepted);
}

}  // namespace
}  // namespace meshtrain::checkpoint
