#include "meshtrain/checkpoint/safetensors_writer.hpp"

#include <algorithm>
#include <bit>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "meshtrain/checkpoint/durable_io.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::checkpoint {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

namespace {

// Data order: larger elements first, then by name (the reference writer's
// order too). The data section starts 8-aligned, so every tensor then starts
// on a multiple of its element size and a reader may map it in place.
std::vector<const TensorEntry*> layout_order(std::span<const TensorEntry> tensors) {
  std::vector<const TensorEntry*> order;
  for (const auto& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TensorEntry* a, const TensorEntry* b) {
    if (dtype_size(a->dtype) != dtype_size(b->dtype)) return dtype_size(a->dtype) > dtype_size(b->dtype);
    return a->name < b->name;
  });
  return order;
}

void check_entry(const TensorEntry& t) {
  if (t.name.empty()) throw CheckpointError("safetensors: a tensor with an empty name");
  if (t.name == "__metadata__") throw CheckpointError("safetensors: '__metadata__' is reserved, not a tensor name");
  uint64_t count = 1;
  for (int64_t d : t.shape) {
    if (d < 0 || __builtin_mul_overflow(count, static_cast<uint64_t>(d), &count))
      throw CheckpointError("safetensors: tensor '" + t.name + "' has invalid shape " + shape_string(t.shape));
  }
  uint64_t expected = 0;
  if (__builtin_mul_overflow(count, dtype_size(t.dtype), &expected) || expected != t.bytes)
    throw CheckpointError("safetensors: tensor '" + t.name + "' of shape " + shape_string(t.shape) + " and dtype " +
                          std::string(dtype_name(t.dtype)) + " needs " + std::to_string(expected) +
                          " bytes, got " + std::to_string(t.bytes));
  if (t.bytes > 0 && t.data == nullptr)
    throw CheckpointError("safetensors: tensor '" + t.name + "' has no data pointer");
}

}  // namespace

std::string safetensors_header(std::span<const TensorEntry> tensors, const Metadata& metadata) {
  // ordered_json keeps insertion order: "__metadata__" first, then tensors in
  // data order, each as dtype, shape, data_offsets — as the reference writer does.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  uint64_t offset = 0;
  std::set<std::string_view> seen;
  for (const TensorEntry* t : layout_order(tensors)) {
    check_entry(*t);
    if (!seen.insert(t->name).second) throw CheckpointError("safetensors: tensor '" + t->name + "' given twice");
    nlohmann::ordered_json info = nlohmann::ordered_json::object();
    info["dtype"] = std::string(dtype_name(t->dtype));
    info["shape"] = t->shape;
    info["data_offsets"] = {offset, offset + t->bytes};
    header[t->name] = std::move(info);
    offset += t->bytes;
  }
  // Strict UTF-8: a name or metadata value that is not valid UTF-8 throws here
  // rather than producing a file other readers reject.
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(std::string("safetensors: cannot encode header: ") + e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

void write_safetensors(const std::filesystem::path& path, std::span<const TensorEntry> tensors,
                       const Metadata& metadata) {
  const std::string header = safetensors_header(tensors, metadata);
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));

  AtomicFile file(path);
  file.write(length, sizeof(length));
  file.write(header.data(), header.size());
  for (const TensorEntry* t : layout_order(tensors)) file.write(t->data, t->bytes);
  file.commit();
}

}  // namespace meshtrain::checkpoint
