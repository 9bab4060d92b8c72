#pragma once
// Saves a synchronous job's checkpoints: every worker writes its own part in
// parallel, and the lead commits the checkpoint once every part is there.
//
// One worker writes the whole layout; several write shards
// (train_checkpoint.hpp): a ZeRO worker its shard, otherwise the same
// per-unit split of the whole model (parallel/zero/shard_layout.hpp), so a
// plain data-parallel checkpoint is written N ways in parallel too. Shards
// go into the directory the lead began (the checkpoint directory must be
// shared by all workers); each file appears by an atomic rename, and the
// lead waits (up to parallel.timeout_s) for all of them before writing the
// manifest that makes the checkpoint complete.
//
// checkpoint.async (default on): save() copies the worker's part into
// memory it keeps for the purpose (MemoryKind::Other, (1 + state buffers)
// x the part's size), returns, and the write and commit run on a thread
// while training goes on. At most one checkpoint is in flight: save() and
// wait() first finish the previous one, and rethrow its failure (the
// previous complete checkpoint stays as it was).
#include <atomic>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/nn/model.hpp"
#include "meshtrain/optim/optimizer.hpp"
#include "meshtrain/parallel/parallel_context.hpp"
#include "meshtrain/parallel/zero/zero_engine.hpp"
#include "meshtrain/train/loop/train_checkpoint.hpp"

namespace meshtrain {

class CheckpointSaver {
 public:
  // zero: the worker's ZeRO engine, or null (stage 0 or one worker).
  CheckpointSaver(const CheckpointSettings& settings, const Model& model, Optimizer& optimizer,
                  parallel::ZeroEngine* zero, parallel::ParallelContext& workers);
  // Abandons a checkpoint still in flight (it never becomes complete).
  ~CheckpointSaver();
  CheckpointSaver(const CheckpointSaver&) = delete;
  CheckpointSaver& operator=(const CheckpointSaver&) = delete;

  // Starts the checkpoint of `state` with the model and optimizer as they
  // are now; every worker calls it at the same step. Returns the directory
  // of the previous checkpoint when this call saw it committed (lead), else
  // "". `last`: the run ends here, so the write runs now, from the live
  // buffers (no copy), and the directory returned is this one's (wait()
  // first to see the previous one's).
  std::string save(const TrainState& state, bool last = false);
  // Finishes the checkpoint in flight: its committed directory (lead), or "".
  // Throws its failure.
  std::string wait();

 private:
  void write(TrainState state, SavedShare share, std::filesystem::path dir,
             std::optional<checkpoint::CheckpointWriter> writer);
  // The worker's part: the live buffers, or (copy) a copy of them.
  SavedShare snapshot(bool copy);

  const CheckpointSettings& settings_;
  const Model& model_;
  Optimizer& optimizer_;
  parallel::ZeroEngine* zero_;
  parallel::ParallelContext& workers_;
  int zero_stage_ = 0;
  bool params_in_shard_ = false, state_in_shard_ = false;
  FlatSegments segments_;
  bool async_ = true;
  std::vector<AlignedBuffer<float>> copies_;  // async: params, then each state buffer, in the shard layout
  std::thread thread_;
  std::exception_ptr error_;
  std::string committed_;
  std::atomic<bool> abandon_{false};
};

}  // namespace meshtrain
