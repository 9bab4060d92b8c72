#include "meshtrain/train/train_checkpoint.hpp"

#include "meshtrain/checkpoint/checkpoint_dir.hpp"
#include "meshtrain/checkpoint/param_io.hpp"
#include "meshtrain/checkpoint/safetensors_reader.hpp"
#include "meshtrain/checkpoint/safetensors_writer.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/train/config_schema.hpp"
#include "meshtrain/train/model_factory.hpp"

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

}  // namespace

std::string save_train_checkpoint(const std::string& root, const TrainState& state, const JobConfig& config,
                                  const Model& model, Optimizer& optimizer, int64_t keep) {
  auto writer = checkpoint::CheckpointWriter::begin(root, state.step);
  const std::string config_toml = job_config_to_toml(config);
  const ParamStore& store = model.store();

  // "format": "pt" lets Hugging Face loaders take the file as a PyTorch state dict.
  checkpoint::save_params(store, writer.file(kModelFile),
                          {{"format", "pt"}, {"step", std::to_string(state.step)}, {"model", model.kind()}});

  std::vector<checkpoint::TensorEntry> entries;
  for (auto& [name, buffer] : optimizer.state_buffers()) {
    auto views = checkpoint::view_tensors(store, buffer->data(), name + ".");
    entries.insert(entries.end(), views.begin(), views.end());
  }
  checkpoint::write_safetensors(writer.file(kStateFile), entries,
                                {{"format", kStateFormat},
                                 {"step", std::to_string(state.step)},
                                 {"data_epoch", std::to_string(state.data.epoch)},
                                 {"data_position", std::to_string(state.data.position)},
                                 {"optimizer", optimizer.name()},
                                 {"optimizer_steps", std::to_string(optimizer.steps_taken())},
                                 {"config", config_toml}});
  auto info = writer.commit();
  checkpoint::prune(root, static_cast<size_t>(keep));
  return info.path.string();
}

std::optional<checkpoint::CheckpointInfo> find_resume_checkpoint(const std::string& root, std::FILE* log) {
  std::vector<std::string> skipped;
  auto latest = checkpoint::latest_verified(root, &skipped);
  if (log)
    for (const auto& why : skipped) std::fprintf(log, "skipping checkpoint: %s\n", why.c_str());
  return latest;
}

TrainState load_train_checkpoint(const std::string& path, const JobConfig& config, Model& model,
                                 Optimizer* optimizer) {
  const fs::path dir(path);
  checkpoint::SafetensorsReader state_file(dir / kStateFile);
  const auto& meta = state_file.metadata();
  const fs::path state_path = dir / kStateFile;
  if (require(meta, "format", state_path) != kStateFormat)
    throw CheckpointError(state_path.string() + ": unknown train-state format '" + meta.at("format") + "'");
  TrainState state;
  state.step = parse_int(require(meta, "step", state_path), "step", state_path);
  state.data.epoch = parse_int(require(meta, "data_epoch", state_path), "data_epoch", state_path);
  state.data.position = parse_int(require(meta, "data_position", state_path), "data_position", state_path);

  // Check everything that can mismatch before writing into the model.
  checkpoint::SafetensorsReader model_file(dir / kModelFile);
  ParamStore& store = model.store();
  std::vector<float> scratch(store.flat_size());
  checkpoint::read_view_tensors(model_file, store, scratch.data());
  if (optimizer) {
    const std::string& saved = require(meta, "optimizer", state_path);
    if (saved != optimizer->name())
      throw CheckpointError(path + ": written with optimizer '" + saved + "', but optimizer.name is '" +
                            config.optimizer.name + "'");
    for (auto& [name, buffer] : optimizer->state_buffers())
      checkpoint::read_view_tensors(state_file, store, buffer->data(), name + ".");
    optimizer->set_steps_taken(parse_int(require(meta, "optimizer_steps", state_path), "optimizer_steps", state_path));
  }
  std::copy(scratch.begin(), scratch.end(), store.params().begin());
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

CheckpointModel load_checkpoint_model(const std::string& user_path, const std::vector<std::string>& overrides) {
  CheckpointModel loaded;
  loaded.path = resolve_checkpoint(user_path);
  loaded.config = checkpoint_config(loaded.path);
  apply_overrides(loaded.config, overrides);
  loaded.model = make_model(loaded.config.model);
  loaded.step = load_train_checkpoint(loaded.path, loaded.config, *loaded.model, nullptr).step;
  return loaded;
}

JobConfig checkpoint_config(const std::string& path) {
  const fs::path file = fs::path(path) / kStateFile;
  checkpoint::SafetensorsReader reader(file);
  return parse_job_config(require(reader.metadata(), "config", file), file.string() + " (config)");
}

}  // namespace meshtrain
