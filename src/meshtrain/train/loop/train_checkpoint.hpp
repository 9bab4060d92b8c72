#pragma once
// A training checkpoint, committed atomically by checkpoint::CheckpointWriter
// with a manifest of checksums, in one of two layouts:
//  - whole (one worker):
//    model.safetensors (the parameters under the model's names, loadable by
//    any safetensors reader) and train_state.safetensors (the optimizer's
//    state buffers as "<state>.<param name>" tensors; step, data position and
//    the job config in its metadata);
//  - sharded (several workers): shard-<r>-of-<N>.safetensors from every
//    worker r, written in parallel, holding its segments of the parameters
//    and of each optimizer state buffer (checkpoint/flat_shards.hpp: its ZeRO
//    shard, or the same split of the whole model when every worker holds
//    all of it); shard 0's metadata carries the training state. Under
//    tensor parallelism each tensor rank t of T saves its own store so:
//    tp-<t>-of-<T>.shard-<r>-of-<N>.safetensors; under expert parallelism
//    each expert rank e of X (its experts and a copy of the dense tensors)
//    ep-<e>-of-<X>.shard-<r>-of-<N>, N the data ranks holding those
//    experts; pipeline stages put pp-<s>-of-<S>. first.
// Either layout loads into any worker count and ZeRO stage, or into one
// process (meshtrain consolidate writes a whole model file from shards); a
// checkpoint of another tensor-parallel width, pipeline split or expert
// split is resharded by placement and name
// (checkpoint/placement_reader.hpp), optimizer state included.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "meshtrain/checkpoint/checkpoint_dir.hpp"
#include "meshtrain/checkpoint/flat_shards.hpp"
#include "meshtrain/core/flat_segment.hpp"
#include "meshtrain/data/sampler.hpp"
#include "meshtrain/nn/model.hpp"
#include "meshtrain/optim/optimizer.hpp"
#include "meshtrain/parallel/zero/zero_engine.hpp"
#include "meshtrain/train/config/job_config.hpp"
#include "meshtrain/train/config/section_configs.hpp"

namespace meshtrain {

struct TrainState {
  int64_t step = 0;   // optimizer steps done
  SamplerState data;  // where the training data order stands
  int64_t skipped_steps = 0;  // steps whose update was left out (update_guard.hpp), counted in `step`
  std::string spike_window;   // SpikeWindow::serialize(); empty without spike skipping
};

// One worker's part of the training state as a checkpoint saves it: live
// buffers or a snapshot of them (checkpoint_saver.hpp), each indexed by flat
// offset or, in_shard, by the segments' local offsets.
struct SavedShare {
  FlatSegments segments;                         // what this worker saves (the whole store for one worker)
  std::vector<checkpoint::ShardBuffer> buffers{};  // "params", then the optimizer's state buffers by name
  std::string optimizer_name;
  int64_t optimizer_steps = 0;
};

// The live buffers of a model and optimizer that own the whole store.
SavedShare whole_share(const Model& model, Optimizer& optimizer);

// Writes and commits a whole checkpoint of them under settings.root, then
// keeps the newest settings.keep complete ones (one process: a parameter
// server's model). Returns the committed directory.
std::string save_train_checkpoint(const CheckpointSettings& settings, const TrainState& state, const Model& model,
                                  Optimizer& optimizer);

// The whole layout into `dir` (a checkpoint being written), with the job
// config's TOML; share.segments must be the whole store.
void write_whole_checkpoint(const std::filesystem::path& dir, const TrainState& state, const std::string& config_toml,
                            const Model& model, const SavedShare& share);
// Which shard a worker writes: its data-parallel rank of `world` among the
// ranks holding the same store (under expert parallelism: the same
// experts), its tensor rank of `tensor_ways`, its stage, its expert rank.
struct ShardCoordinate {
  int rank = 0, world = 1;
  int tensor_rank = 0, tensor_ways = 1;
  int pipeline_rank = 0, pipeline_ways = 1;
  int expert_rank = 0, expert_ways = 1;
  int zero_stage = 0;
};
// Writes a worker's shard into `dir`; the first worker's (rank 0, tensor
// rank 0, stage 0) carries the training state and the job config's TOML.
void write_checkpoint_shard(const std::filesystem::path& dir, const ShardCoordinate& at, const TrainState& state,
                            const std::string& config_toml, const ParamStore& store, const SavedShare& share);

// The newest checkpoint under root that passes its checksums; corrupt newer
// ones are reported on `log` (when given) and skipped. nullopt when there is none.
std::optional<checkpoint::CheckpointInfo> find_resume_checkpoint(const std::string& root, std::FILE* log);

// Loads parameters (and optimizer state, when given) into a model built from
// the job's config, whatever layout the checkpoint has: into the whole store,
// or, with `zero`, into this worker's shard (stage 3's parameters) and its
// optimizer's segments. A checkpoint of another model shape or optimizer is
// refused with a CheckpointError naming the difference, before anything is
// overwritten.
TrainState load_train_checkpoint(const std::string& path, Model& model, Optimizer* optimizer,
                                 parallel::ZeroEngine* zero = nullptr);

// The parameters in `reader` (this rank's layout) into the model: with a
// ZeRO stage-3 `zero`, this worker's shard of them; else the whole store.
void read_parameters(const checkpoint::FlatRangeReader& reader, Model& model, parallel::ZeroEngine* zero = nullptr);

// A checkpoint directory given by a user: a step directory itself, or a
// directory of them (the newest verified one is taken). Verified either way.
std::string resolve_checkpoint(const std::string& path);

// The job config a checkpoint was trained with.
JobConfig checkpoint_config(const std::string& path);

// A trained model for eval and generation: the user's checkpoint path
// resolved and verified, its job config (with command-line overrides
// applied), and the model built from it with the saved parameters, on the
// CPU or on the device an override names (--training.device=cuda).
struct CheckpointModel {
  std::string path;  // the step directory loaded
  JobConfig config;
  std::unique_ptr<Model> model;
  int64_t step = 0;
};
CheckpointModel load_checkpoint_model(const std::string& user_path, const std::vector<std::string>& overrides = {});

}  // namespace meshtrain
