#pragma once
// Buffers in a ParamStore's flat layout (parameters, optimizer state), saved
// in shards by the ranks that own them and read back by flat range, so a
// checkpoint written by N ranks at one ZeRO stage loads on M ranks at
// another, or into one process.
//
// A shard file holds, for each buffer and each of the rank's segments, a
// 1-D F32 tensor "<buffer>@<first flat index>" (written straight from the
// buffer, no packing). Its metadata holds the store's flat size and a
// fingerprint of its layout (every view's name, shape and offset), so
// shards of another model are refused.
//
// FlatRangeReader reads any flat range of a buffer from a set of shard
// files (which together must cover the whole layout), or from a whole-model
// checkpoint whose tensors are named per view (param_io.hpp).
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "meshtrain/checkpoint/safetensors_reader.hpp"
#include "meshtrain/checkpoint/safetensors_writer.hpp"
#include "meshtrain/core/flat_segment.hpp"
#include "meshtrain/core/param_store.hpp"

namespace meshtrain::checkpoint {

// One buffer to save: data indexed by flat offset, or (in_shard) by the
// segments' local offsets.
struct ShardBuffer {
  std::string name;
  const float* data = nullptr;
  bool in_shard = false;
};

// "shard-00001-of-00004.safetensors"; under tensor parallelism (tensor_ways
// > 1) each tensor rank's data-parallel shards are
// "tp-00000-of-00002.shard-00001-of-00004.safetensors" (a checkpoint is one
// flat directory: checkpoint/manifest.hpp); under pipeline parallelism
// (pipeline_ways > 1) each stage's files start with "pp-00001-of-00004.";
// under expert parallelism (expert_ways > 1) each expert rank's files
// (its experts, and a copy of the dense tensors) carry "ep-00001-of-00002."
// after the stage's: "pp-..ep-..tp-..shard-..", the data ranks that hold
// the same experts splitting them.
std::string shard_file_name(int rank, int world, int tensor_rank = 0, int tensor_ways = 1, int pipeline_rank = 0,
                            int pipeline_ways = 1, int expert_rank = 0, int expert_ways = 1);
// The prefix every shard file of one tensor rank of one expert rank of one
// pipeline stage starts with ("shard-" when every way is 1).
std::string shard_file_prefix(int tensor_rank, int tensor_ways, int pipeline_rank = 0, int pipeline_ways = 1,
                              int expert_rank = 0, int expert_ways = 1);

// Writes `segments` of every buffer to `path` (atomically, as
// write_safetensors does), with `metadata` plus the layout keys above.
void write_flat_shard(const std::filesystem::path& path, const ParamStore& store, const FlatSegments& segments,
                      const std::vector<ShardBuffer>& buffers, Metadata metadata);

class FlatRangeReader {
 public:
  virtual ~FlatRangeReader() = default;
  // Fills out[0, end - begin) with flat elements [begin, end) of `buffer`
  // (the padding between views reads as 0). CheckpointError if the
  // checkpoint lacks the buffer.
  virtual void read(std::string_view buffer, size_t begin, size_t end, float* out) const = 0;
  virtual bool has(std::string_view buffer) const = 0;
};

// Shard files (all of one checkpoint). Checks before returning that every
// file has this store's layout and that together they cover it; throws
// CheckpointError naming the file or the gap otherwise.
std::unique_ptr<FlatRangeReader> open_flat_shards(const std::vector<std::filesystem::path>& files,
                                                  const ParamStore& store);

// Whole-model files: each buffer is a file and a tensor-name prefix
// (e.g. {"params", model.safetensors, ""}, {"exp_avg", train_state.safetensors,
// "exp_avg."}). Each file's tensors under the prefix must match the store's
// views exactly (param_io.hpp's rule), checked when a buffer is first read.
struct ViewTensorSource {
  std::string buffer;
  std::filesystem::path file;
  std::string prefix;
};
std::unique_ptr<FlatRangeReader> open_view_tensors(const std::vector<ViewTensorSource>& sources,
                                                   const ParamStore& store);

// The metadata of a shard file (rank 0's carries the training state).
Metadata read_shard_metadata(const std::filesystem::path& file);

}  // namespace meshtrain::checkpoint
