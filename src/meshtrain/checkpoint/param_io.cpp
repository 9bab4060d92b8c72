#include "meshtrain/checkpoint/param_io.hpp"

#include <unordered_set>

#include "meshtrain/core/error.hpp"

namespace meshtrain::checkpoint {

namespace {
// Enough differences to see the pattern (a renamed layer, a changed width)
// without flooding the message for a completely different model.
constexpr size_t kMaxListed = 5;

void require_allocated(const ParamStore& store) {
  if (!store.allocated()) throw CheckpointError("ParamStore must be allocated before saving or loading");
}
}  // namespace

std::vector<TensorEntry> view_tensors(const ParamStore& store, const float* flat, std::string_view prefix) {
  require_allocated(store);
  std::vector<TensorEntry> entries;
  entries.reserve(store.views().size());
  for (const ParamView& v : store.views())
    entries.push_back({std::string(prefix) + v.name, Dtype::F32, v.shape, flat + v.offset, v.numel * sizeof(float)});
  return entries;
}

// Names and shapes only: a layout store (not allocated) can be checked too,
// as a resharded read of a whole checkpoint does.
void check_view_tensors(const SafetensorsReader& reader, const ParamStore& store, std::string_view prefix) {
  std::vector<std::string> differences;
  size_t count = 0;
  auto note = [&](std::string text) {
    if (count++ < kMaxListed) differences.push_back(std::move(text));
  };
  std::unordered_set<std::string> expected;
  for (const ParamView& v : store.views()) {
    const std::string name = std::string(prefix) + v.name;
    expected.insert(name);
    const TensorInfo* t = reader.find(name);
    if (!t)
      note("missing tensor '" + name + "' " + shape_string(v.shape));
    else if (!widens_to_float(t->dtype) || t->shape != v.shape)
      note("tensor '" + name + "': model has F32 " + shape_string(v.shape) + ", file has " +
           std::string(dtype_name(t->dtype)) + " " + shape_string(t->shape));
  }
  for (const TensorInfo& t : reader.tensors())
    if (t.name.starts_with(prefix) && !expected.count(t.name))
      note("extra tensor '" + t.name + "' " + shape_string(t.shape) + " not in the model");
  if (count > 0) {
    std::string msg = "checkpoint " + reader.path().string() + " does not match the model (" +
                      std::to_string(count) + " difference" + (count > 1 ? "s" : "") + "):";
    for (const auto& d : differences) msg += "\n  " + d;
    if (count > differences.size()) msg += "\n  ... and " + std::to_string(count - differences.size()) + " more";
    throw CheckpointError(msg);
  }
}

void read_view_tensors(const SafetensorsReader& reader, const ParamStore& store, float* flat,
                       std::string_view prefix) {
  check_view_tensors(reader, store, prefix);
  for (const ParamView& v : store.views())
    reader.read_elements(std::string(prefix) + v.name, 0, std::span<float>(flat + v.offset, v.numel));
}

std::vector<TensorEntry> bf16_tensors(std::span<const TensorEntry> f32, std::vector<Bf16>& storage) {
  size_t total = 0;
  for (const TensorEntry& t : f32) {
    if (t.dtype != Dtype::F32) throw CheckpointError("tensor '" + t.name + "': only F32 tensors narrow to BF16");
    total += t.bytes / sizeof(float);
  }
  storage.resize(total);  // before any pointer into it is taken
  std::vector<TensorEntry> out;
  out.reserve(f32.size());
  size_t at = 0;
  for (const TensorEntry& t : f32) {
    const size_t n = t.bytes / sizeof(float);
    const float* src = static_cast<const float*>(t.data);
    for (size_t i = 0; i < n; ++i) storage[at + i] = to_bf16(src[i]);
    out.push_back({t.name, Dtype::BF16, t.shape, storage.data() + at, n * sizeof(Bf16)});
    at += n;
  }
  return out;
}

void save_params(const ParamStore& store, const std::filesystem::path& path, const Metadata& metadata, Dtype dtype) {
  std::vector<TensorEntry> entries = view_tensors(store, store.params().data());
  if (dtype == Dtype::F32) return write_safetensors(path, entries, metadata);
  if (dtype != Dtype::BF16) throw CheckpointError("parameters are written as F32 or BF16, not " + std::string(dtype_name(dtype)));
  std::vector<Bf16> storage;
  write_safetensors(path, bf16_tensors(entries, storage), metadata);
}

void load_params(ParamStore& store, const std::filesystem::path& path) {
  SafetensorsReader reader(path);
  read_view_tensors(reader, store, store.params().data());
}

}  // namespace meshtrain::checkpoint
