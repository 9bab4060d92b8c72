#include "meshtrain/checkpoint/safetensors_reader.hpp"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "meshtrain/core/error.hpp"

namespace meshtrain::checkpoint {

namespace {

using json = nlohmann::json;

// A valid header nests three levels (root -> tensor -> shape). Refusing
// anything deeper while parsing keeps a hostile "[[[[..." from building a
// 100 MB-deep tree; thrown from the parser callback to stop at once.
constexpr int kMaxDepth = 4;
struct ParseAbort {
  std::string problem;
};

// A JSON non-negative integer that fits int64 (so it also fits Shape and off_t).
bool as_count(const json& v, uint64_t& out) {
  if (!v.is_number_unsigned()) return false;
  out = v.get<uint64_t>();
  return out <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

}  // namespace

void SafetensorsReader::fail(const std::string& problem) const {
  throw CheckpointError("safetensors file " + fd_.path().string() + ": " + problem);
}

SafetensorsReader::SafetensorsReader(const std::filesystem::path& path) : fd_(Fd::open_read(path)) {
  const uint64_t file_bytes = fd_.size();
  if (file_bytes < 8)
    fail("file has " + std::to_string(file_bytes) + " bytes, too short for the 8-byte header length");
  uint8_t le[8];
  if (!fd_.pread_exact(le, 8, 0)) fail("file shrank while reading the header length");
  uint64_t header_bytes = 0;
  for (int i = 0; i < 8; ++i) header_bytes |= static_cast<uint64_t>(le[i]) << (8 * i);
  if (header_bytes > kMaxHeaderBytes)
    fail("header length " + std::to_string(header_bytes) + " exceeds the limit of " +
         std::to_string(kMaxHeaderBytes) + " bytes");
  if (header_bytes > file_bytes - 8)
    fail("header length " + std::to_string(header_bytes) + " exceeds the " + std::to_string(file_bytes - 8) +
         " bytes that follow it");
  std::string text(header_bytes, '\0');
  if (!fd_.pread_exact(text.data(), text.size(), 8)) fail("file shrank while reading the header");
  data_start_ = 8 + header_bytes;
  parse_header(text, file_bytes - data_start_);
}

void SafetensorsReader::parse_header(std::string_view text, uint64_t data_bytes) {
  const json header = parse_header_json(text);
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__")
      read_metadata(value);
    else
      tensors_.push_back(parse_tensor(name, value, data_bytes));
  }
  check_tiling(data_bytes);
  for (size_t i = 0; i < tensors_.size(); ++i) by_name_.emplace(tensors_[i].name, i);
}

json SafetensorsReader::parse_header_json(std::string_view text) const {
  if (text.empty() || text.front() != '{') fail("header does not start with '{'");
  json header;
  std::set<std::string> root_keys;
  try {
    auto guard = [&](int depth, json::parse_event_t event, json& parsed) {
      if (depth > kMaxDepth) throw ParseAbort{"header nests deeper than " + std::to_string(kMaxDepth) + " levels"};
      // nlohmann keeps the last of duplicate keys silently; a duplicated
      // tensor name means a corrupt or forged header, so refuse it.
      if (event == json::parse_event_t::key && depth == 1 && !root_keys.insert(parsed.get<std::string>()).second)
        throw ParseAbort{"header names '" + parsed.get<std::string>() + "' twice"};
      return true;
    };
    header = json::parse(text.begin(), text.end(), guard, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const ParseAbort& e) {
    fail(e.problem);
  } catch (const json::exception& e) {
    fail(std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) fail("header is not a JSON object");
  return header;
}

void SafetensorsReader::read_metadata(const json& value) {
  if (!value.is_object()) fail("__metadata__ is not an object");
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string()) fail("__metadata__ value for '" + key + "' is not a string");
    metadata_[key] = v.get<std::string>();
  }
}

TensorInfo SafetensorsReader::parse_tensor(const std::string& name, const json& value, uint64_t data_bytes) const {
  const std::string where = "tensor '" + name + "'";
  if (!value.is_object()) fail(where + " is not an object");
  if (value.size() != 3 || !value.contains("dtype") || !value.contains("shape") || !value.contains("data_offsets"))
    fail(where + " must have exactly the fields dtype, shape, data_offsets");
  TensorInfo info;
  info.name = name;
  const json& dtype = value["dtype"];
  if (!dtype.is_string()) fail(where + ": dtype is not a string");
  auto parsed = parse_dtype(dtype.get<std::string>());
  if (!parsed) fail(where + ": unknown dtype '" + dtype.get<std::string>() + "'");
  info.dtype = *parsed;

  const json& shape = value["shape"];
  if (!shape.is_array()) fail(where + ": shape is not an array");
  uint64_t count = 1;
  for (const json& d : shape) {
    uint64_t dim = 0;
    if (!as_count(d, dim)) fail(where + ": shape holds " + d.dump() + ", not a dimension");
    if (__builtin_mul_overflow(count, dim, &count)) fail(where + ": shape's element count overflows");
    info.shape.push_back(static_cast<int64_t>(dim));
  }
  uint64_t expected_bytes = 0;
  if (__builtin_mul_overflow(count, dtype_size(info.dtype), &expected_bytes)) fail(where + ": byte size overflows");

  const json& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !as_count(offsets[0], info.begin) ||
      !as_count(offsets[1], info.end))
    fail(where + ": data_offsets is not [begin, end] of non-negative integers");
  if (info.begin > info.end)
    fail(where + ": data_offsets begin " + std::to_string(info.begin) + " > end " + std::to_string(info.end));
  if (info.end > data_bytes)
    fail(where + ": data_offsets end " + std::to_string(info.end) + " is past the data section's " +
         std::to_string(data_bytes) + " bytes");
  if (info.end - info.begin != expected_bytes)
    fail(where + ": shape " + shape_string(info.shape) + " x " + std::string(dtype_name(info.dtype)) + " is " +
         std::to_string(expected_bytes) + " bytes but data_offsets span " + std::to_string(info.end - info.begin));
  return info;
}

// The tensors must tile the data section exactly: sorted by offset, each
// begins where the previous ended, the first at 0, the last at the end.
void SafetensorsReader::check_tiling(uint64_t data_bytes) {
  std::sort(tensors_.begin(), tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t cursor = 0;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo& t : tensors_) {
    if (t.begin < cursor) fail("tensor '" + t.name + "' overlaps tensor '" + previous->name + "'");
    if (t.begin > cursor) fail("hole of " + std::to_string(t.begin - cursor) + " bytes before tensor '" + t.name + "'");
    cursor = t.end;
    previous = &t;
  }
  if (cursor != data_bytes) fail(std::to_string(data_bytes - cursor) + " bytes of trailing data after the last tensor");
}

const TensorInfo* SafetensorsReader::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& SafetensorsReader::info(std::string_view name) const {
  const TensorInfo* t = find(name);
  if (!t) fail("no tensor named '" + std::string(name) + "'");
  return *t;
}

void SafetensorsReader::read(std::string_view name, Dtype dtype, const Shape& shape,
                             std::span<std::byte> out) const {
  const TensorInfo& t = info(name);
  if (t.dtype != dtype)
    fail("tensor '" + t.name + "': expected dtype " + std::string(dtype_name(dtype)) + ", found " +
         std::string(dtype_name(t.dtype)));
  if (t.shape != shape)
    fail("tensor '" + t.name + "': expected shape " + shape_string(shape) + ", found " + shape_string(t.shape));
  if (out.size() != t.bytes())
    fail("tensor '" + t.name + "' has " + std::to_string(t.bytes()) + " bytes but the buffer holds " +
         std::to_string(out.size()));
  if (!fd_.pread_exact(out.data(), out.size(), data_start_ + t.begin))
    fail("tensor '" + t.name + "' ends past the end of the file (was it truncated after opening?)");
}

void SafetensorsReader::read_elements(std::string_view name, size_t first, std::span<float> out) const {
  const TensorInfo& t = info(name);
  if (!widens_to_float(t.dtype))
    fail("tensor '" + t.name + "': expected a float dtype (F32, BF16 or F16), found " +
         std::string(dtype_name(t.dtype)));
  const size_t size = dtype_size(t.dtype);
  const uint64_t count = t.bytes() / size;
  if (first > count || out.size() > count - first)
    fail("tensor '" + t.name + "' has " + std::to_string(count) + " elements; elements [" + std::to_string(first) +
         ", " + std::to_string(first + out.size()) + ") were asked for");
  if (out.empty()) return;
  const uint64_t offset = data_start_ + t.begin + first * size;
  const auto truncated = [&] { fail("tensor '" + t.name + "' ends past the end of the file (was it truncated after opening?)"); };
  if (t.dtype == Dtype::F32) {
    if (!fd_.pread_exact(out.data(), out.size_bytes(), offset)) truncated();
    return;
  }
  // 16-bit floats (a Hugging Face model saved in half precision): read into
  // the upper half of `out`'s bytes, then widen front to back, which never
  // overwrites a 16-bit value before it is read.
  auto* halves = reinterpret_cast<uint16_t*>(out.data()) + out.size();
  if (!fd_.pread_exact(halves, out.size() * sizeof(uint16_t), offset)) truncated();
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = t.dtype == Dtype::BF16 ? bf16_to_float(halves[i]) : f16_to_float(halves[i]);
}

}  // namespace meshtrain::checkpoint
