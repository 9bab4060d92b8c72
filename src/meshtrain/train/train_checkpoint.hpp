#pragma once
// A training checkpoint, committed atomically by checkpoint::CheckpointWriter
// with a manifest of checksums, in one of two layouts:
//  - whole (one worker, or ZeRO stage 0, written by the lead):
//    model.safetensors (the parameters under the model's names, loadable by
//    any safetensors reader) and train_state.safetensors (the optimizer's
//    state buffers as "<state>.<param name>" tensors; step, data position and
//    the job config in its metadata);
//  - sharded (ZeRO stages 1-3): shard-<r>-of-<N>.safetensors from every
//    worker r, holding its segments of the parameters and of each optimizer
//    state buffer (checkpoint/flat_shards.hpp); shard 0's metadata carries
//    the training state.
// Either layout loads into any worker count and ZeRO stage, or into one
// process (meshtrain consolidate writes a whole model file from shards).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "meshtrain/checkpoint/checkpoint_dir.hpp"
#include "meshtrain/data/sampler.hpp"
#include "meshtrain/nn/model.hpp"
#include "meshtrain/optim/optimizer.hpp"
#include "meshtrain/parallel/zero/zero_engine.hpp"
#include "meshtrain/train/job_config.hpp"
#include "meshtrain/train/worker_group.hpp"

namespace meshtrain {

struct TrainState {
  int64_t step = 0;   // optimizer steps done
  SamplerState data;  // where the training data order stands
};

// Writes and commits a checkpoint for state.step under root, then keeps the
// newest `keep` complete ones. Returns the committed directory.
std::string save_train_checkpoint(const std::string& root, const TrainState& state, const JobConfig& config,
                                  const Model& model, Optimizer& optimizer, int64_t keep);

// Every worker of a ZeRO job calls this: each writes its shard into the
// directory the lead began, then the lead commits and prunes. Returns the
// committed directory on the lead, "" on the others.
std::string save_sharded_train_checkpoint(const std::string& root, const TrainState& state, const JobConfig& config,
                                          const Model& model, Optimizer& optimizer, int64_t keep,
                                          parallel::ZeroEngine& zero, WorkerGroup& workers);

// The newest checkpoint under root that passes its checksums; corrupt newer
// ones are reported on `log` (when given) and skipped. nullopt when there is none.
std::optional<checkpoint::CheckpointInfo> find_resume_checkpoint(const std::string& root, std::FILE* log);

// Loads parameters (and optimizer state, when given) into a model built from
// `config`, whatever layout the checkpoint has: into the whole store, or,
// with `zero`, into this worker's shard (stage 3's parameters) and its
// optimizer's segments. A checkpoint of another model shape or optimizer is
// refused with a CheckpointError naming the difference, before anything is
// overwritten.
TrainState load_train_checkpoint(const std::string& path, const JobConfig& config, Model& model,
                                 Optimizer* optimizer, parallel::ZeroEngine* zero = nullptr);

// A checkpoint directory given by a user: a step directory itself, or a
// directory of them (the newest verified one is taken). Verified either way.
std::string resolve_checkpoint(const std::string& path);

// The job config a checkpoint was trained with.
JobConfig checkpoint_config(const std::string& path);

// A trained model for eval and generation: the user's checkpoint path
// resolved and verified, its job config (with command-line overrides
// applied), and the model built from it with the saved parameters.
struct CheckpointModel {
  std::string path;  // the step directory loaded
  JobConfig config;
  std::unique_ptr<Model> model;
  int64_t step = 0;
};
CheckpointModel load_checkpoint_model(const std::string& user_path, const std::vector<std::string>& overrides = {});

}  // namespace meshtrain
