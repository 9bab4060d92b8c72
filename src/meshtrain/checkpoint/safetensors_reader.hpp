#pragma once
// Reads safetensors files (layout in safetensors_writer.hpp), trusting
// nothing: the constructor validates the whole header against the file size
// before any tensor is read, so every later read is in bounds. Any violation
// is a CheckpointError naming the file and the problem.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "meshtrain/checkpoint/durable_io.hpp"
#include "meshtrain/checkpoint/dtype.hpp"
#include "meshtrain/checkpoint/safetensors_writer.hpp"
#include "meshtrain/core/shape.hpp"

namespace meshtrain::checkpoint {

// Headers above this are refused before allocation (the reference
// implementation's limit), so a corrupt length cannot exhaust memory.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::F32;
  Shape shape;
  uint64_t begin = 0;  // byte offsets relative to the start of the data section
  uint64_t end = 0;
  uint64_t bytes() const { return end - begin; }
};

class SafetensorsReader {
 public:
  // Opens and validates; throws IoError if the file cannot be opened,
  // CheckpointError if its contents are not a valid safetensors file.
  explicit SafetensorsReader(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return fd_.path(); }
  // Every tensor, in data order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // The tensor with this name, or nullptr.
  const TensorInfo* find(std::string_view name) const;
  // The tensor with this name; throws CheckpointError if absent.
  const TensorInfo& info(std::string_view name) const;
  const Metadata& metadata() const { return metadata_; }

  // Copies tensor `name` into `out` after checking that it has this dtype and
  // shape (CheckpointError naming the tensor, expected and found otherwise)
  // and that `out` holds exactly its bytes.
  void read(std::string_view name, Dtype dtype, const Shape& shape, std::span<std::byte> out) const;
  template <typename T>
  void read(std::string_view name, const Shape& shape, std::span<T> out) const {
    read(name, dtype_of<T>(), shape, std::as_writable_bytes(out));
  }
  // Part of an F32 tensor of any shape, taken flat: elements [first,
  // first + out.size()). CheckpointError when the range or dtype does not fit.
  void read_elements(std::string_view name, size_t first, std::span<float> out) const;

 private:
  [[noreturn]] void fail(const std::string& problem) const;
  void parse_header(std::string_view text, uint64_t data_bytes);
  nlohmann::json parse_header_json(std::string_view text) const;  // depth- and duplicate-checked
  void read_metadata(const nlohmann::json& value);
  TensorInfo parse_tensor(const std::string& name, const nlohmann::json& value, uint64_t data_bytes) const;
  void check_tiling(uint64_t data_bytes);  // sorts tensors_ by offset; they must tile the data section

  Fd fd_;
  uint64_t data_start_ = 0;  // 8 + header length
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> by_name_;
  Metadata metadata_;
};

}  // namespace meshtrain::checkpoint
