#pragma once
// Checkpoint directories of a training run:
//
//   <dir>/step_00000100/          a complete checkpoint: files + MANIFEST.json
//   <dir>/.step_00000200.tmp-<pid> a checkpoint being written (or abandoned)
//
// Commit protocol: files are written into the tmp directory, fsynced and
// listed with their checksums in MANIFEST.json (manifest.hpp); then the tmp
// directory is renamed to its final name and <dir> is fsynced. Only a
// directory with the final name and a valid manifest whose files have their
// listed sizes counts as complete; anything else is ignored by listing and
// never trusted by loading.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "meshtrain/checkpoint/manifest.hpp"

namespace meshtrain::checkpoint {

// "step_00000100"; more digits once the step passes 99,999,999.
std::string step_dir_name(int64_t step);

struct CheckpointInfo {
  int64_t step = 0;
  std::filesystem::path path;  // <dir>/step_<S>
};

class CheckpointWriter {
 public:
  // Creates <dir> if needed and the tmp directory for `step`. IoError if
  // <dir> cannot be created or written; nothing existing is touched.
  static CheckpointWriter begin(const std::filesystem::path& dir, int64_t step);

  CheckpointWriter(CheckpointWriter&& other) noexcept;
  CheckpointWriter& operator=(CheckpointWriter&&) = delete;
  CheckpointWriter(const CheckpointWriter&) = delete;
  // Without commit(), removes the tmp directory: an abandoned checkpoint.
  ~CheckpointWriter();
  // Gives the checkpoint up without removing its tmp directory, for a
  // sharded checkpoint that other processes may still be writing into (they
  // then fail on their own error, not on a vanished directory); prune()
  // removes it once no live process owns it.
  void abandon_in_place();

  // Where the writer begun by process `writer_pid` (on this host or
  // another sharing `dir`) puts the files of `step`: the ranks of a sharded
  // checkpoint write their shards there, and the one that began commits.
  static std::filesystem::path tmp_path_for(const std::filesystem::path& dir, int64_t step, int64_t writer_pid);

  int64_t step() const { return step_; }
  // Where to write this checkpoint's files.
  const std::filesystem::path& tmp_path() const { return tmp_; }
  std::filesystem::path file(std::string_view name) const { return tmp_ / name; }

  // Writes the manifest and publishes the directory under its final name. If
  // a checkpoint for this step already exists, it is replaced only after the
  // new one is complete (an atomic exchange where the filesystem offers one).
  // `job` goes into the manifest (manifest.hpp).
  CheckpointInfo commit(const ManifestJob& job = {});

 private:
  CheckpointWriter(std::filesystem::path dir, int64_t step, std::filesystem::path tmp);

  std::filesystem::path dir_;
  int64_t step_ = 0;
  std::filesystem::path tmp_;  // empty once committed or moved from
};

// Complete checkpoints in `dir`, oldest step first. A missing `dir` has none;
// an unreadable one is an IoError. Each skipped step_* directory adds a
// reason to `skipped` when given.
std::vector<CheckpointInfo> list_complete(const std::filesystem::path& dir,
                                          std::vector<std::string>* skipped = nullptr);
// The newest complete checkpoint, if any (manifest and sizes checked, not checksums).
std::optional<CheckpointInfo> latest_complete(const std::filesystem::path& dir);

// Full check before loading: manifest valid, step matches the name, every
// file's size and CRC-32 match. Throws CheckpointError naming the problem.
Manifest verify_checkpoint(const std::filesystem::path& step_dir);
// The newest checkpoint that passes verify_checkpoint; corrupt newer ones are
// skipped (reasons appended to `skipped`), so a resume falls back a step.
std::optional<CheckpointInfo> latest_verified(const std::filesystem::path& dir,
                                              std::vector<std::string>* skipped = nullptr);

// Retention. Deletes the oldest complete checkpoints beyond the newest
// `keep` (at least 1 is always kept, so the only complete checkpoint is never
// deleted), and tmp directories whose writer process is gone. Leaves alone
// anything it cannot classify. Returns the removed paths.
//
// Liveness is judged by pid on this host: run prune on one host per shared
// directory, and note that a recycled pid keeps a stale tmp dir a while longer.
std::vector<std::filesystem::path> prune(const std::filesystem::path& dir, size_t keep);

}  // namespace meshtrain::checkpoint
