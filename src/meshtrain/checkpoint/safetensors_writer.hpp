#pragma once
// Writes safetensors files (https://github.com/huggingface/safetensors):
//   [8 bytes: N, little-endian u64]
//   [N bytes: UTF-8 JSON header, padded with spaces to a multiple of 8]
//   [data: every tensor's bytes, little-endian, back to back]
// The header maps each tensor name to {"dtype", "shape", "data_offsets":
// [begin, end]} (offsets relative to the start of the data), plus an optional
// "__metadata__" object of string -> string.
#include <cstddef>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "meshtrain/checkpoint/dtype.hpp"
#include "meshtrain/core/shape.hpp"

namespace meshtrain::checkpoint {

using Metadata = std::map<std::string, std::string>;

// One tensor to write. `data` points at `bytes` bytes, which must equal
// numel(shape) * dtype_size(dtype); the caller keeps it alive during the write.
struct TensorEntry {
  std::string name;
  Dtype dtype = Dtype::F32;
  Shape shape;
  const void* data = nullptr;
  size_t bytes = 0;
};

// A typed entry; bytes follow from the span.
template <typename T>
TensorEntry tensor_entry(std::string name, Shape shape, std::span<const T> values) {
  return {std::move(name), dtype_of<T>(), std::move(shape), values.data(), values.size_bytes()};
}

// The header bytes (without the 8-byte length) for these tensors, in the
// order write_safetensors lays them out. Exposed for tests and for tools that
// want the size before writing. Throws CheckpointError on an invalid entry.
std::string safetensors_header(std::span<const TensorEntry> tensors, const Metadata& metadata);

// Writes the file atomically: a temporary file in the same directory, fsync,
// rename over `path`, fsync the directory. An existing file at `path` stays
// intact until the new one is complete. Throws CheckpointError for invalid
// entries, IoError for I/O failures.
void write_safetensors(const std::filesystem::path& path, std::span<const TensorEntry> tensors,
                       const Metadata& metadata = {});

}  // namespace meshtrain::checkpoint
