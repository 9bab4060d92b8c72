#include "meshtrain/checkpoint/flat_shards.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "meshtrain/checkpoint/crc32.hpp"
#include "meshtrain/checkpoint/param_io.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::checkpoint {
namespace fs = std::filesystem;
namespace {

constexpr const char* kFlatSizeKey = "flat_size";
constexpr const char* kLayoutKey = "layout_crc32";

std::string layout_fingerprint(const ParamStore& store) {
  uint32_t crc = 0;
  for (const ParamView& v : store.views()) {
    const std::string line = v.name + " " + shape_string(v.shape) + " " + std::to_string(v.offset) + "\n";
    crc = crc32_update(crc, line.data(), line.size());
  }
  char text[16];
  std::snprintf(text, sizeof text, "%08x", crc);
  return text;
}

// "exp_avg@1024" -> {"exp_avg", 1024}; false for other names.
bool parse_tensor_name(const std::string& name, std::string* buffer, size_t* begin) {
  const size_t at = name.rfind('@');
  if (at == std::string::npos || at + 1 == name.size()) return false;
  size_t value = 0;
  for (size_t i = at + 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    value = value * 10 + size_t(name[i] - '0');
  }
  *buffer = name.substr(0, at);
  *begin = value;
  return true;
}

struct Piece {
  size_t begin = 0, end = 0;  // flat range
  size_t file = 0;            // index into readers_
  std::string tensor;
};

class ShardSetReader final : public FlatRangeReader {
 public:
  ShardSetReader(const std::vector<fs::path>& files, const ParamStore& store) : flat_size_(store.flat_size()) {
    if (files.empty()) throw CheckpointError("no shard files to load");
    const std::string layout = layout_fingerprint(store);
    for (const auto& path : files) {
      auto reader = std::make_unique<SafetensorsReader>(path);
      const auto& meta = reader->metadata();
      auto flat = meta.find(kFlatSizeKey);
      auto crc = meta.find(kLayoutKey);
      if (flat == meta.end() || crc == meta.end())
        throw CheckpointError(path.string() + ": not a meshtrain shard file (no layout in its metadata)");
      if (flat->second != std::to_string(flat_size_) || crc->second != layout)
        throw CheckpointError(path.string() + ": written for another model (flat size " + flat->second +
                              ", layout " + crc->second + "; this model has " + std::to_string(flat_size_) +
                              ", " + layout + ")");
      for (const TensorInfo& t : reader->tensors()) {
        std::string buffer;
        size_t begin = 0;
        if (!parse_tensor_name(t.name, &buffer, &begin) || t.dtype != Dtype::F32 || t.shape.size() != 1)
          throw CheckpointError(path.string() + ": unexpected tensor '" + t.name + "' in a shard file");
        const size_t end = begin + size_t(t.shape[0]);
        if (end > flat_size_)
          throw CheckpointError(path.string() + ": tensor '" + t.name + "' ends past the model's " +
                                std::to_string(flat_size_) + " elements");
        pieces_[buffer].push_back({begin, end, readers_.size(), t.name});
      }
      readers_.push_back(std::move(reader));
    }
    // Every buffer must be covered exactly once, end to end.
    for (auto& [buffer, pieces] : pieces_) {
      std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
      size_t covered = 0;
      for (const Piece& p : pieces) {
        if (p.begin != covered)
          throw CheckpointError("shards of '" + buffer + "' " + (p.begin > covered ? "leave out" : "overlap at") +
                                " elements from " + std::to_string(std::min(p.begin, covered)) +
                                " (a shard file missing from the checkpoint?)");
        covered = p.end;
      }
      if (covered != flat_size_)
        throw CheckpointError("shards of '" + buffer + "' cover " + std::to_string(covered) + " of " +
                              std::to_string(flat_size_) + " elements (a shard file missing from the checkpoint?)");
    }
  }

  bool has(std::string_view buffer) const override { return pieces_.count(std::string(buffer)) > 0; }

  void read(std::string_view buffer, size_t begin, size_t end, float* out) const override {
    auto it = pieces_.find(std::string(buffer));
    if (it == pieces_.end()) throw CheckpointError("the checkpoint's shards hold no '" + std::string(buffer) + "'");
    const auto& pieces = it->second;
    // The first piece that ends after begin; pieces tile [0, flat_size).
    auto p = std::upper_bound(pieces.begin(), pieces.end(), begin,
                              [](size_t value, const Piece& piece) { return value < piece.end; });
    for (; p != pieces.end() && p->begin < end; ++p) {
      const size_t lo = std::max(begin, p->begin), hi = std::min(end, p->end);
      readers_[p->file]->read_elements(p->tensor, lo - p->begin, std::span<float>(out + (lo - begin), hi - lo));
    }
  }

 private:
  size_t flat_size_;
  std::vector<std::unique_ptr<SafetensorsReader>> readers_;
  std::map<std::string, std::vector<Piece>> pieces_;
};

class ViewTensorReader final : public FlatRangeReader {
 public:
  ViewTensorReader(const std::vector<ViewTensorSource>& sources, const ParamStore& store) : store_(store) {
    for (const auto& s : sources) {
      auto reader = std::make_unique<SafetensorsReader>(s.file);
      check_view_tensors(*reader, store, s.prefix);
      buffers_[s.buffer] = {std::move(reader), s.prefix};
    }
  }

  bool has(std::string_view buffer) const override { return buffers_.count(std::string(buffer)) > 0; }

  void read(std::string_view buffer, size_t begin, size_t end, float* out) const override {
    auto it = buffers_.find(std::string(buffer));
    if (it == buffers_.end()) throw CheckpointError("the checkpoint holds no '" + std::string(buffer) + "'");
    const auto& [reader, prefix] = it->second;
    if (end > begin) std::memset(out, 0, (end - begin) * sizeof(float));  // padding between views
    for (const ParamView& v : store_.views()) {
      const size_t lo = std::max(begin, v.offset), hi = std::min(end, v.offset + v.numel);
      if (lo >= hi) continue;
      reader->read_elements(prefix + v.name, lo - v.offset, std::span<float>(out + (lo - begin), hi - lo));
    }
  }

 private:
  struct Source {
    std::unique_ptr<SafetensorsReader> reader;
    std::string prefix;
  };
  const ParamStore& store_;
  std::map<std::string, Source> buffers_;
};

}  // namespace

std::string shard_file_prefix(int tensor_rank, int tensor_ways, int pipeline_rank, int pipeline_ways, int expert_rank,
                              int expert_ways) {
  char stage[32] = "", expert[32] = "", tensor[32] = "";
  if (pipeline_ways > 1) std::snprintf(stage, sizeof stage, "pp-%05d-of-%05d.", pipeline_rank, pipeline_ways);
  if (expert_ways > 1) std::snprintf(expert, sizeof expert, "ep-%05d-of-%05d.", expert_rank, expert_ways);
  if (tensor_ways > 1) std::snprintf(tensor, sizeof tensor, "tp-%05d-of-%05d.", tensor_rank, tensor_ways);
  return std::string(stage) + expert + tensor + "shard-";
}

std::string shard_file_name(int rank, int world, int tensor_rank, int tensor_ways, int pipeline_rank,
                            int pipeline_ways, int expert_rank, int expert_ways) {
  char name[64];
  std::snprintf(name, sizeof name, "%05d-of-%05d.safetensors", rank, world);
  return shard_file_prefix(tensor_rank, tensor_ways, pipeline_rank, pipeline_ways, expert_rank, expert_ways) + name;
}

void write_flat_shard(const fs::path& path, const ParamStore& store, const FlatSegments& segments,
                      const std::vector<ShardBuffer>& buffers, Metadata metadata) {
  std::vector<TensorEntry> entries;
  for (const ShardBuffer& b : buffers)
    for (const FlatSegment& s : segments) {
      if (s.size() == 0) continue;
      const float* data = b.data + (b.in_shard ? s.local : s.begin);
      entries.push_back({b.name + "@" + std::to_string(s.begin), Dtype::F32, {int64_t(s.size())}, data,
                         s.size() * sizeof(float)});
    }
  metadata[kFlatSizeKey] = std::to_string(store.flat_size());
  metadata[kLayoutKey] = layout_fingerprint(store);
  write_safetensors(path, entries, metadata);
}

std::unique_ptr<FlatRangeReader> open_flat_shards(const std::vector<fs::path>& files, const ParamStore& store) {
  return std::make_unique<ShardSetReader>(files, store);
}

std::unique_ptr<FlatRangeReader> open_view_tensors(const std::vector<ViewTensorSource>& sources,
                                                   const ParamStore& store) {
  return std::make_unique<ViewTensorReader>(sources, store);
}

Metadata read_shard_metadata(const fs::path& file) { return SafetensorsReader(file).metadata(); }

}  // namespace meshtrain::checkpoint
