#include "meshtrain/train/loop/train_checkpoint.hpp"

#include <algorithm>
#include <optional>

#include "meshtrain/checkpoint/checkpoint_dir.hpp"
#include "meshtrain/checkpoint/flat_shards.hpp"
#include "meshtrain/checkpoint/manifest.hpp"
#include "meshtrain/checkpoint/param_io.hpp"
#include "meshtrain/checkpoint/placement_reader.hpp"
#include "meshtrain/checkpoint/safetensors_reader.hpp"
#include "meshtrain/checkpoint/safetensors_writer.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/nn/gpt.hpp"
#include "meshtrain/parallel/expert/solo_expert_group.hpp"
#include "meshtrain/parallel/tensor/solo_tensor_group.hpp"
#include "meshtrain/train/config/config_schema.hpp"
#include "meshtrain/train/engine/model_factory.hpp"
#include "meshtrain/train/loop/training_device.hpp"

namespace meshtrain {
namespace fs = std::filesystem;
namespace {

constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kStateFile = "train_state.safetensors";
constexpr const char* kStateFormat = "meshtrain-train-state-1";

const std::string& require(const checkpoint::Metadata& meta, const std::string& key, const fs::path& file) {
  auto it = meta.find(key);
  if (it == meta.end()) throw CheckpointError(file.string() + ": metadata lacks '" + key + "'");
  return it->second;
}

int64_t parse_int(const std::string& text, const std::string& key, const fs::path& file) {
  try {
    size_t used = 0;
    int64_t v = std::stoll(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw CheckpointError(file.string() + ": metadata '" + key + "' is not a count: '" + text + "'");
}

// The training state every checkpoint's metadata carries (train_state's, or shard 0's).
checkpoint::Metadata state_metadata(const TrainState& state, const std::string& config_toml, const SavedShare& share) {
  return {{"format", kStateFormat},
          {"step", std::to_string(state.step)},
          {"data_epoch", std::to_string(state.data.epoch)},
          {"data_position", std::to_string(state.data.position)},
          {"skipped_steps", std::to_string(state.skipped_steps)},
          {"spike_window", state.spike_window},
          {"optimizer", share.optimizer_name},
          {"optimizer_steps", std::to_string(share.optimizer_steps)},
          {"config", config_toml}};
}

// Files of `dir` whose names start with one of `prefixes`, in name order.
std::vector<fs::path> files_named(const fs::path& dir, std::initializer_list<std::string> prefixes) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    for (const std::string& prefix : prefixes)
      if (name.starts_with(prefix) && name.ends_with(".safetensors")) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Where a rank's files sit in a sharded checkpoint: its tensor rank of its
// expert rank of its pipeline stage.
struct SavedCoordinate {
  int tensor_rank = 0, tensor_ways = 1, stage = 0, stages = 1, expert_rank = 0, expert_ways = 1;
};

// One saved rank's shard files of a sharded checkpoint; empty for a whole one.
std::vector<fs::path> shard_files(const fs::path& dir, const SavedCoordinate& at) {
  return files_named(dir, {checkpoint::shard_file_prefix(at.tensor_rank, at.tensor_ways, at.stage, at.stages,
                                                         at.expert_rank, at.expert_ways)});
}

// The file whose metadata holds the training state: the first worker's
// shard (tensor rank 0, data rank 0), or the whole checkpoint's state file.
fs::path state_file(const fs::path& dir) {
  auto shards = files_named(dir, {checkpoint::shard_file_prefix(0, 1), "tp-", "pp-", "ep-"});
  return shards.empty() ? dir / kStateFile : shards.front();
}

// Where a store sits in its tensor-parallel group, read off its placements.
struct TensorCoordinate {
  int index = 0, ways = 1;
};
TensorCoordinate tensor_coordinate(const ParamStore& store) {
  for (const ParamView& v : store.views())
    if (!v.placement.replicated()) return {v.placement.index, v.placement.parts};
  return {};
}

// Where a model sits in its expert-parallel group (a dense model: 0 of 1).
struct ExpertCoordinate {
  int index = 0, ways = 1;
};
ExpertCoordinate expert_coordinate(const Model& model) {
  const auto* gpt = dynamic_cast<const Gpt*>(&model);
  return gpt ? ExpertCoordinate{gpt->expert_rank(), gpt->expert_ways()} : ExpertCoordinate{};
}

// A reader of one saved rank's buffers in `layout` (whole checkpoints have
// one rank).
std::unique_ptr<checkpoint::FlatRangeReader> open_saved_rank(
    const fs::path& dir, const SavedCoordinate& at, const ParamStore& layout,
    const std::vector<std::pair<std::string, DeviceArray<float>*>>& states) {
  if (auto shards = shard_files(dir, at); !shards.empty()) return checkpoint::open_flat_shards(shards, layout);
  if (at.tensor_ways > 1 || at.stages > 1 || at.expert_ways > 1)
    throw CheckpointError(dir.string() + ": holds no shard of tensor-parallel rank " + std::to_string(at.tensor_rank) +
                          " of " + std::to_string(at.tensor_ways) + ", pipeline stage " + std::to_string(at.stage) +
                          " of " + std::to_string(at.stages) + ", expert rank " + std::to_string(at.expert_rank) +
                          " of " + std::to_string(at.expert_ways));
  std::vector<checkpoint::ViewTensorSource> sources{{"params", dir / kModelFile, ""}};
  for (auto& [name, buffer] : states) sources.push_back({name, dir / kStateFile, name + "."});
  return checkpoint::open_view_tensors(sources, layout);
}

// The pieces a model holds: a pipeline rank's, or the whole model's.
std::vector<GptPiece> pieces_of(const Model& model) {
  std::vector<GptPiece> pieces;
  if (const auto* gpt = dynamic_cast<const Gpt*>(&model))
    for (size_t p = 0; p < gpt->pieces(); ++p) pieces.push_back(gpt->piece(p));
  return pieces;
}

// The pieces each stage of the saved job held (by its config).
std::vector<std::vector<GptPiece>> saved_stage_pieces(const JobConfig& saved) {
  const ParallelSection& p = saved.parallel;
  std::vector<std::vector<GptPiece>> stages;
  for (int s = 0; s < int(p.pipeline); ++s) {
    parallel::SoloExpertGroup experts(0, static_cast<int>(p.expert));  // the pieces do not depend on it
    const std::unique_ptr<Model> model = make_model(saved.model, model_layout(p, nullptr, s, &experts));
    stages.push_back(pieces_of(*model));
  }
  return stages;
}

// A checkpoint saved at another tensor-parallel width, pipeline split or
// expert split, read by placement and name (checkpoint/placement_reader.hpp):
// each saved rank's layout comes from the model the checkpoint's own config
// describes (an expert rank's: its experts, by name, and the dense tensors,
// which every expert rank holds the same).
std::unique_ptr<checkpoint::FlatRangeReader> open_resharded_checkpoint(
    const fs::path& dir, const JobConfig& saved, int saved_ways, int saved_experts, const ParamStore& store,
    const std::vector<std::pair<std::string, DeviceArray<float>*>>& states) {
  parallel::SoloTensorGroup group(0, saved_ways);  // for the layout only
  const int stages = static_cast<int>(saved.parallel.pipeline);
  std::vector<checkpoint::SavedTensorRank> ranks;
  for (int s = 0; s < stages; ++s)
    for (int e = 0; e < saved_experts; ++e) {
      parallel::SoloExpertGroup experts(e, saved_experts);
      const std::unique_ptr<Model> model =
          make_model(saved.model, model_layout(saved.parallel, saved_ways > 1 ? &group : nullptr, s,
                                               saved_experts > 1 ? &experts : nullptr));
      for (int t = 0; t < saved_ways; ++t) {
        checkpoint::SavedTensorRank rank{.layout = checkpoint::layout_copy(model->store(), saved_ways > 1 ? t : -1)};
        rank.reader = open_saved_rank(dir, {t, saved_ways, s, stages, e, saved_experts}, *rank.layout, states);
        ranks.push_back(std::move(rank));
      }
    }
  return checkpoint::open_resharded(std::move(ranks), store);
}

}  // namespace

SavedShare whole_share(const Model& model, Optimizer& optimizer) {
  if (!model.store().on_host())
    throw Error("whole_share: the parameters live on " + device_name(model.store().device()) +
                "; CheckpointSaver downloads them");
  SavedShare share{.segments = {{.begin = 0, .end = model.store().flat_size(), .local = 0}},
                   .buffers = {{"params", model.store().params().data(), false}},
                   .optimizer_name = optimizer.name(),
                   .optimizer_steps = optimizer.steps_taken()};
  for (auto& [name, buffer] : optimizer.state_buffers()) share.buffers.push_back({name, buffer->raw(), false});
  return share;
}

std::string save_train_checkpoint(const CheckpointSettings& settings, const TrainState& state, const Model& model,
                                  Optimizer& optimizer) {
  auto writer = checkpoint::CheckpointWriter::begin(settings.root, state.step);
  write_whole_checkpoint(writer.tmp_path(), state, settings.config_toml, model, whole_share(model, optimizer));
  auto info = writer.commit({.config = settings.config_toml});
  checkpoint::prune(settings.root, static_cast<size_t>(settings.keep));
  return info.path.string();
}

void write_whole_checkpoint(const fs::path& dir, const TrainState& state, const std::string& config_toml,
                            const Model& model, const SavedShare& share) {
  const ParamStore& store = model.store();
  if (share.segments.size() != 1 || share.segments[0].size() != store.flat_size() || share.buffers.empty())
    throw CheckpointError("write_whole_checkpoint: the share is not the whole model");
  // "format": "pt" lets Hugging Face loaders take the file as a PyTorch state dict.
  checkpoint::write_safetensors(dir / kModelFile, checkpoint::view_tensors(store, share.buffers[0].data),
                                {{"format", "pt"}, {"step", std::to_string(state.step)}, {"model", model.kind()}});
  std::vector<checkpoint::TensorEntry> entries;
  for (size_t b = 1; b < share.buffers.size(); ++b) {
    auto views = checkpoint::view_tensors(store, share.buffers[b].data, share.buffers[b].name + ".");
    entries.insert(entries.end(), views.begin(), views.end());
  }
  checkpoint::write_safetensors(dir / kStateFile, entries, state_metadata(state, config_toml, share));
}

void write_checkpoint_shard(const fs::path& dir, const ShardCoordinate& at, const TrainState& state,
                            const std::string& config_toml, const ParamStore& store, const SavedShare& share) {
  const bool first = at.rank == 0 && at.tensor_rank == 0 && at.pipeline_rank == 0 && at.expert_rank == 0;
  checkpoint::Metadata meta = first ? state_metadata(state, config_toml, share) : checkpoint::Metadata{};
  meta["zero_stage"] = std::to_string(at.zero_stage);
  meta["workers"] = std::to_string(at.world);
  meta["tensor_parallel"] = std::to_string(at.tensor_ways);
  meta["pipeline_parallel"] = std::to_string(at.pipeline_ways);
  meta["expert_parallel"] = std::to_string(at.expert_ways);
  checkpoint::write_flat_shard(dir / checkpoint::shard_file_name(at.rank, at.world, at.tensor_rank, at.tensor_ways,
                                                                 at.pipeline_rank, at.pipeline_ways, at.expert_rank,
                                                                 at.expert_ways),
                               store, share.segments, share.buffers, meta);
}

std::optional<checkpoint::CheckpointInfo> find_resume_checkpoint(const std::string& root, std::FILE* log) {
  std::vector<std::string> skipped;
  auto latest = checkpoint::latest_verified(root, &skipped);
  if (log)
    for (const auto& why : skipped) std::fprintf(log, "warning: skipping checkpoint: %s\n", why.c_str());
  return latest;
}

void read_parameters(const checkpoint::FlatRangeReader& reader, Model& model, parallel::ZeroEngine* zero) {
  ParamStore& store = model.store();
  auto param_shard = zero ? zero->param_shard() : std::span<float>{};
  if (param_shard.empty() && !store.on_host()) {  // read on the host, then to the device
    std::vector<float> host(store.flat_size());
    reader.read("params", 0, store.flat_size(), host.data());
    store.upload_params(host);
    return;
  }
  if (param_shard.empty()) {
    reader.read("params", 0, store.flat_size(), store.params().data());
    return;
  }
  // ZeRO-3's shard, read on the host and, off the CPU, uploaded (the padding stays zero).
  const bool staged = !store.on_host();
  std::vector<float> host(staged ? param_shard.size() : 0);
  float* into = staged ? host.data() : param_shard.data();
  for (const FlatSegment& s : zero->layout().segments()) reader.read("params", s.begin, s.end, into + s.local);
  if (staged) kernels::backend_for(store.device()).allocator().upload(param_shard.data(), host.data(), host.size() * sizeof(float));
}

TrainState load_train_checkpoint(const std::string& path, Model& model, Optimizer* optimizer,
                                 parallel::ZeroEngine* zero) {
  const fs::path dir(path);
  const fs::path meta_path = state_file(dir);
  const checkpoint::Metadata meta = checkpoint::SafetensorsReader(meta_path).metadata();
  if (require(meta, "format", meta_path) != kStateFormat)
    throw CheckpointError(meta_path.string() + ": unknown train-state format '" + meta.at("format") + "'");
  TrainState state;
  state.step = parse_int(require(meta, "step", meta_path), "step", meta_path);
  state.data.epoch = parse_int(require(meta, "data_epoch", meta_path), "data_epoch", meta_path);
  state.data.position = parse_int(require(meta, "data_position", meta_path), "data_position", meta_path);
  // Absent in checkpoints written before steps could be skipped.
  if (auto it = meta.find("skipped_steps"); it != meta.end())
    state.skipped_steps = parse_int(it->second, "skipped_steps", meta_path);
  if (auto it = meta.find("spike_window"); it != meta.end()) state.spike_window = it->second;

  // Opening checks every file against the model before anything is written.
  ParamStore& store = model.store();
  std::vector<std::pair<std::string, DeviceArray<float>*>> states;
  if (optimizer) {
    const std::string& saved = require(meta, "optimizer", meta_path);
    if (saved != optimizer->name())
      throw CheckpointError(path + ": written with optimizer '" + saved + "', but optimizer.name is '" +
                            optimizer->name() + "'");
    states = optimizer->state_buffers();
  }
  // The same tensor-parallel width and a saved stage with this rank's
  // pieces read that rank's own files by flat range; another layout (one
  // process included) reshards by placement and name.
  const checkpoint::Manifest manifest = checkpoint::read_manifest(dir);
  const int saved_ways = manifest.job.tp, saved_experts = manifest.job.ep;
  const TensorCoordinate here = tensor_coordinate(store);
  const ExpertCoordinate experts_here = expert_coordinate(model);
  const JobConfig saved = checkpoint_config(path);
  const std::vector<std::vector<GptPiece>> saved_stages =
      manifest.job.pp > 1 ? saved_stage_pieces(saved) : std::vector<std::vector<GptPiece>>{};
  const std::vector<GptPiece> mine = pieces_of(model);
  const bool whole_model = mine.empty() || (mine.size() == 1 && mine[0].embedding && mine[0].head &&
                                      mine[0].first_layer == 0 && mine[0].end_layer == saved.model.n_layer);
  int stage = manifest.job.pp == 1 && whole_model ? 0 : -1;  // the saved stage whose files this rank reads as they are
  for (size_t s = 0; s < saved_stages.size(); ++s)
    if (saved_stages[s] == mine) stage = static_cast<int>(s);
  std::unique_ptr<checkpoint::FlatRangeReader> reader =
      saved_ways == here.ways && saved_experts == experts_here.ways && stage >= 0
          ? open_saved_rank(dir, {here.index, here.ways, stage, manifest.job.pp, experts_here.index, experts_here.ways},
                            store, states)
          : open_resharded_checkpoint(dir, saved, saved_ways, saved_experts, store, states);
  for (auto& [name, buffer] : states)
    if (!reader->has(name)) throw CheckpointError(path + ": holds no optimizer state '" + name + "'");

  read_parameters(*reader, model, zero);
  // This worker's elements of the optimizer state: its ZeRO segments, or the whole store.
  const FlatSegments whole{{.begin = 0, .end = store.flat_size(), .local = 0}};
  const FlatSegments& owned = zero ? zero->layout().segments() : whole;
  for (auto& [name, buffer] : states) {
    std::vector<float> host(buffer->size());  // read on the host, then to the state's memory
    for (const FlatSegment& s : owned) reader->read(name, s.begin, s.end, host.data() + s.local);
    buffer->upload(host);
  }
  if (optimizer)
    optimizer->set_steps_taken(parse_int(require(meta, "optimizer_steps", meta_path), "optimizer_steps", meta_path));
  return state;
}

std::string resolve_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) throw CheckpointError(path + ": not a checkpoint directory");
  if (fs::exists(fs::path(path) / "MANIFEST.json", ec)) {
    checkpoint::verify_checkpoint(path);
    return path;
  }
  std::vector<std::string> skipped;
  auto latest = checkpoint::latest_verified(path, &skipped);
  if (!latest) {
    std::string why = skipped.empty() ? "" : " (skipped: " + skipped.front() + ")";
    throw CheckpointError(path + ": no complete checkpoint" + why);
  }
  return latest->path.string();
}

namespace {

// The device a checkpoint's model is built on: the one the overrides name
// (--training.device=cuda), else the CPU, wherever it trained. Opened
// first, as a training job does (no usable GPU: DeviceError, status 3).
Device checkpoint_device(JobConfig& config, const std::vector<std::string>& overrides) {
  const bool named = std::any_of(overrides.begin(), overrides.end(),
                                 [](const std::string& o) { return o.rfind("--training.device", 0) == 0; });
  if (!named) config.training.device = "cpu";
  return open_training_device(config.training).device;
}

}  // namespace

CheckpointModel load_checkpoint_model(const std::string& user_path, const std::vector<std::string>& overrides) {
  CheckpointModel loaded;
  loaded.path = resolve_checkpoint(user_path);
  loaded.config = checkpoint_config(loaded.path);
  apply_overrides(loaded.config, overrides);
  ModelLayout layout;
  layout.precision = loaded.config.training.precision;  // evaluated as it trained
  layout.attention = loaded.config.training.attention;
  layout.device = checkpoint_device(loaded.config, overrides);
  loaded.model = make_model(loaded.config.model, layout);
  loaded.step = load_train_checkpoint(loaded.path, *loaded.model, nullptr).step;
  return loaded;
}

JobConfig checkpoint_config(const std::string& path) {
  const fs::path file = state_file(path);
  checkpoint::SafetensorsReader reader(file);
  return parse_job_config(require(reader.metadata(), "config", file), file.string() + " (config)");
}

}  // namespace meshtrain
