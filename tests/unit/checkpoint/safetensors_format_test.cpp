// Byte-level checks against the safetensors format as its authors specify it:
// u64 little-endian header length N, N bytes of JSON padded with spaces to a
// multiple of 8, then the tensors' little-endian bytes at data_offsets.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "meshtrain/checkpoint/safetensors_reader.hpp"
#include "meshtrain/checkpoint/safetensors_writer.hpp"
#include "temp_dir.hpp"

namespace meshtrain::checkpoint {
namespace {

using testing::TempDir;

TEST(SafetensorsFormat, ReadsAFileBuiltByHandFromTheSpec) {
  TempDir tmp;
  // Header padded with trailing spaces, as the spec allows.
  const std::string header =
      R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"I64","shape":[],"data_offsets":[8,16]}}    )";
  // a = [1.0f, 2.0f]: IEEE bits 0x3f800000, 0x40000000, little-endian. b = -5 as int64.
  const std::string data("\x00\x00\x80\x3f\x00\x00\x00\x40"
                         "\xfb\xff\xff\xff\xff\xff\xff\xff",
                         16);
  testing::write_bytes(tmp / "h.safetensors", testing::safetensors_bytes(header, data));

  SafetensorsReader reader(tmp / "h.safetensors");
  EXPECT_EQ(reader.metadata().at("k"), "v");
  float a[2];
  reader.read<float>("a", {2}, std::span<float>(a));
  EXPECT_EQ(a[0], 1.0f);
  EXPECT_EQ(a[1], 2.0f);
  int64_t b = 0;
  reader.read<int64_t>("b", {}, std::span<int64_t>(&b, 1));
  EXPECT_EQ(b, -5);
}

TEST(SafetensorsFormat, WrittenFileHasTheSpecifiedLayout) {
  TempDir tmp;
  const std::vector<float> w = {1, 2, 3, 4};        // (2, 2) F32
  const std::vector<double> d = {0.5};              // (1) F64
  const std::vector<uint8_t> u = {7, 8, 9};         // (3) U8
  std::vector<TensorEntry> entries = {tensor_entry<float>("w", {2, 2}, w), tensor_entry<uint8_t>("u", {3}, u),
                                      tensor_entry<double>("d", {1}, d)};
  const auto path = tmp / "w.safetensors";
  write_safetensors(path, entries, {{"note", "hi"}});
  const std::string bytes = testing::read_bytes(path);

  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  EXPECT_EQ(n % 8, 0u) << "header padded so data starts 8-aligned";
  ASSERT_EQ(bytes.size(), 8 + n + 16 + 8 + 3);
  const std::string header = bytes.substr(8, n);
  // Compact JSON, __metadata__ first, larger dtypes first, then by name; spaces pad.
  const std::string expected =
      R"({"__metadata__":{"note":"hi"},"d":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},)"
      R"("w":{"dtype":"F32","shape":[2,2],"data_offsets":[8,24]},)"
      R"("u":{"dtype":"U8","shape":[3],"data_offsets":[24,27]}})";
  EXPECT_EQ(header.substr(0, expected.size()), expected);
  EXPECT_EQ(header.find_first_not_of(' ', expected.size()), std::string::npos);
  EXPECT_TRUE(nlohmann::json::accept(header));

  // Data: each tensor's little-endian bytes at its offset.
  const std::string data = bytes.substr(8 + n);
  double d0;
  std::memcpy(&d0, data.data(), 8);
  EXPECT_EQ(d0, 0.5);
  float w3;
  std::memcpy(&w3, data.data() + 8 + 12, 4);
  EXPECT_EQ(w3, 4.0f);
  EXPECT_EQ(data.substr(24), std::string("\x07\x08\x09"));
}

TEST(SafetensorsFormat, HeaderOmitsEmptyMetadata) {
  TempDir tmp;
  const std::vector<float> w = {1};
  std::vector<TensorEntry> entries = {tensor_entry<float>("w", {1}, w)};
  const std::string header = safetensors_header(entries, {});
  EXPECT_EQ(header.find("__metadata__"), std::string::npos);
  EXPECT_EQ(header.size() % 8, 0u);
}

TEST(SafetensorsFormat, EveryTensorStartsAlignedToItsElementSize) {
  TempDir tmp;
  const std::vector<uint8_t> u(3);
  const std::vector<int16_t> s(5);
  const std::vector<float> f(7);
  const std::vector<int64_t> l(2);
  std::vector<TensorEntry> entries = {tensor_entry<uint8_t>("a", {3}, u), tensor_entry<int16_t>("b", {5}, s),
                                      tensor_entry<float>("c", {7}, f), tensor_entry<int64_t>("d", {2}, l)};
  write_safetensors(tmp / "a.safetensors", entries);
  SafetensorsReader reader(tmp / "a.safetensors");
  for (const TensorInfo& t : reader.tensors()) EXPECT_EQ(t.begin % dtype_size(t.dtype), 0u) << t.name;
}

}  // namespace
}  // namespace meshtrain::checkpoint
