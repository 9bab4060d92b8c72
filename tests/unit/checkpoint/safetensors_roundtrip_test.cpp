// Write -> read round trips of the safetensors writer and reader.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "meshtrain/checkpoint/safetensors_reader.hpp"
#include "meshtrain/checkpoint/safetensors_writer.hpp"
#include "meshtrain/core/error.hpp"
#include "temp_dir.hpp"

namespace meshtrain::checkpoint {
namespace {

using testing::TempDir;

TEST(SafetensorsRoundTrip, SeveralDtypesShapesAndMetadata) {
  TempDir tmp;
  const std::vector<float> f32 = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, 7.0f};  // (2, 3)
  const std::vector<double> f64 = {3.141592653589793, -1e300, 2.0, 0.5};    // (4)
  const std::vector<int32_t> i32 = {-1, 2, INT32_MAX, INT32_MIN};           // (2, 2)
  const std::vector<int64_t> i64 = {INT64_MIN};                             // () scalar
  const std::vector<uint8_t> u8 = {0, 1, 127, 128, 255};                    // (5)
  const std::vector<uint16_t> bf16 = {0x3f80, 0xc000, 0x0001};              // (3), raw bits
  const std::vector<float> empty;                                           // (0, 3)
  std::vector<TensorEntry> entries = {
      tensor_entry<float>("layer.weight", {2, 3}, f32),
      tensor_entry<double>("f64", {4}, f64),
      tensor_entry<int32_t>("ints", {2, 2}, i32),
      tensor_entry<int64_t>("scalar", {}, i64),
      tensor_entry<uint8_t>("bytes", {5}, u8),
      {"bf16", Dtype::BF16, {3}, bf16.data(), bf16.size() * 2},
      tensor_entry<float>("empty", {0, 3}, empty),
  };
  const Metadata meta = {{"format", "pt"}, {"step", "12"}, {"unicode", "\xce\xbb=λ"}};
  const auto path = tmp / "m.safetensors";
  write_safetensors(path, entries, meta);

  SafetensorsReader reader(path);
  EXPECT_EQ(reader.tensors().size(), entries.size());
  EXPECT_EQ(reader.metadata(), meta);

  std::vector<float> f32_out(6);
  reader.read<float>("layer.weight", {2, 3}, std::span<float>(f32_out));
  EXPECT_EQ(f32_out, f32);
  std::vector<double> f64_out(4);
  reader.read<double>("f64", {4}, std::span<double>(f64_out));
  EXPECT_EQ(f64_out, f64);
  std::vector<int32_t> i32_out(4);
  reader.read<int32_t>("ints", {2, 2}, std::span<int32_t>(i32_out));
  EXPECT_EQ(i32_out, i32);
  std::vector<int64_t> i64_out(1);
  reader.read<int64_t>("scalar", {}, std::span<int64_t>(i64_out));
  EXPECT_EQ(i64_out, i64);
  std::vector<uint8_t> u8_out(5);
  reader.read<uint8_t>("bytes", {5}, std::span<uint8_t>(u8_out));
  EXPECT_EQ(u8_out, u8);
  std::vector<uint16_t> bf16_out(3);
  reader.read("bf16", Dtype::BF16, {3}, std::as_writable_bytes(std::span<uint16_t>(bf16_out)));
  EXPECT_EQ(bf16_out, bf16);
  std::vector<float> empty_out;
  reader.read<float>("empty", {0, 3}, std::span<float>(empty_out));

  const TensorInfo& info = reader.info("ints");
  EXPECT_EQ(info.dtype, Dtype::I32);
  EXPECT_EQ(info.shape, (Shape{2, 2}));
  EXPECT_EQ(info.bytes(), 16u);
  EXPECT_EQ(reader.find("nope"), nullptr);
}

TEST(SafetensorsRoundTrip, ReadChecksDtypeShapeAndBufferSize) {
  TempDir tmp;
  const std::vector<float> w(6, 1.0f);
  std::vector<TensorEntry> entries = {tensor_entry<float>("w", {2, 3}, w)};
  write_safetensors(tmp / "a.safetensors", entries);
  SafetensorsReader reader(tmp / "a.safetensors");
  std::vector<float> out(6);
  try {
    reader.read<float>("w", {3, 2}, std::span<float>(out));
    FAIL() << "shape mismatch accepted";
  } catch (const CheckpointError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected shape (3, 2)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("found (2, 3)"), std::string::npos) << msg;
  }
  std::vector<double> wrong_type(6);
  EXPECT_THROW(reader.read<double>("w", {2, 3}, std::span<double>(wrong_type)), CheckpointError);
  std::vector<float> small(5);
  EXPECT_THROW(reader.read<float>("w", {2, 3}, std::span<float>(small)), CheckpointError);
  EXPECT_THROW(reader.info("missing"), CheckpointError);
}

TEST(SafetensorsRoundTrip, WriterRejectsInvalidEntries) {
  TempDir tmp;
  const std::vector<float> v(4);
  auto write = [&](std::vector<TensorEntry> e) { write_safetensors(tmp / "x.safetensors", e); };
  EXPECT_THROW(write({{"a", Dtype::F32, {3}, v.data(), 16}}), CheckpointError);  // 3 floats != 16 bytes
  EXPECT_THROW(write({tensor_entry<float>("a", {4}, v), tensor_entry<float>("a", {4}, v)}), CheckpointError);
  EXPECT_THROW(write({tensor_entry<float>("__metadata__", {4}, v)}), CheckpointError);
  EXPECT_THROW(write({{"neg", Dtype::F32, {-1}, v.data(), 0}}), CheckpointError);
  EXPECT_FALSE(std::filesystem::exists(tmp / "x.safetensors"));
}

TEST(SafetensorsRoundTrip, FailedWriteKeepsExistingFileAndLeavesNoTemp) {
  TempDir tmp;
  const auto path = tmp / "m.safetensors";
  const std::vector<float> v = {1, 2, 3, 4};
  std::vector<TensorEntry> good = {tensor_entry<float>("a", {4}, v)};
  write_safetensors(path, good);
  const std::string before = testing::read_bytes(path);
  std::vector<TensorEntry> bad = {{"a", Dtype::F32, {5}, v.data(), 16}};
  EXPECT_THROW(write_safetensors(path, bad), CheckpointError);
  EXPECT_EQ(testing::read_bytes(path), before);
  // A write that succeeds replaces the file and leaves only it behind.
  const std::vector<float> w = {9, 9};
  std::vector<TensorEntry> next = {tensor_entry<float>("b", {2}, w)};
  write_safetensors(path, next);
  EXPECT_NE(SafetensorsReader(path).find("b"), nullptr);
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(tmp.path())) ++files;
  EXPECT_EQ(files, 1u);
}

TEST(SafetensorsRoundTrip, EmptyFileOfNoTensors) {
  TempDir tmp;
  write_safetensors(tmp / "e.safetensors", std::vector<TensorEntry>{});
  SafetensorsReader reader(tmp / "e.safetensors");
  EXPECT_TRUE(reader.tensors().empty());
  EXPECT_TRUE(reader.metadata().empty());
}

TEST(SafetensorsRoundTrip, MissingFileIsIoError) {
  TempDir tmp;
  EXPECT_THROW(SafetensorsReader(tmp / "absent.safetensors"), IoError);
}

TEST(SafetensorsRoundTrip, HalfPrecisionWidensToFloatInElementReads) {
  TempDir tmp;
  // bf16 1, -2, 0.5; f16 1, -2, 65504 (largest), 2^-24 (smallest subnormal), -0, inf.
  const std::vector<uint16_t> bf16 = {0x3f80, 0xc000, 0x3f00};
  const std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x7c00};
  const std::vector<TensorEntry> entries = {{"b", Dtype::BF16, {3}, bf16.data(), bf16.size() * 2},
                                            {"h", Dtype::F16, {2, 3}, f16.data(), f16.size() * 2}};
  write_safetensors(tmp / "half.safetensors", entries, {});
  SafetensorsReader reader(tmp / "half.safetensors");
  std::vector<float> b(3), h(5);
  reader.read_elements("b", 0, b);
  reader.read_elements("h", 1, h);  // from the second element on
  EXPECT_EQ(b, (std::vector<float>{1.0f, -2.0f, 0.5f}));
  EXPECT_EQ(h[0], -2.0f);
  EXPECT_EQ(h[1], 65504.0f);
  EXPECT_EQ(h[2], 0x1p-24f);
  EXPECT_TRUE(h[3] == 0.0f && std::signbit(h[3]));
  EXPECT_TRUE(std::isinf(h[4]));
  EXPECT_EQ(f16_to_float(0x3555), 0.333251953125f);  // 1/3 rounded to f16
}

}  // namespace
}  // namespace meshtrain::checkpoint
