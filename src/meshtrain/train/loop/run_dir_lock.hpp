#pragma once
// One job per run directory. The lead worker of a job (worker rank 0, of a
// synchronous or a parameter-server job) locks <training.out_dir>/.meshtrain.lock
// with flock(LOCK_EX | LOCK_NB) before anything is written there (metrics,
// TensorBoard, checkpoints) and holds it until it exits; the file records
// the holder's host, pid, parent pid, start time and command line. A second
// job on the same directory (a double submission, a Slurm requeue while the
// old job still writes) stops at once with a RunDirBusyError naming the
// holder, instead of both appending to metrics.jsonl and writing
// checkpoints into one directory.
//
// The lock dies with its holder: the kernel releases a flock when the
// process exits, however it ends (SIGKILL included), so a job restarted
// after its processes died (`meshtrain run`'s whole-job restart, a
// scheduler's retry) takes it again. A lock is held past its job only by a
// holder alive but hung, or on a host that is gone with the lock still held
// by a network file system's server: kill the process the message names,
// or delete the lock file, which is a takeover: the next job creates a
// fresh file and locks that (the old holder keeps a lock on a file no
// longer in the directory).
//
// The file descriptor is close-on-exec, so no process the holder starts
// keeps the lock after it. Evaluators and other readers of the directory
// take no lock. Across hosts only the lead locks, so the lock file is
// where the lead writes: on a network file system flock works across
// hosts where the file system supports it (NFS does, emulated with byte
// range locks; Lustre needs its `flock` mount option); where it cannot lock
// at all (ENOLCK, ENOSYS...) the job warns and runs without the check.
#include <optional>
#include <string>

#include "meshtrain/core/error.hpp"

namespace meshtrain {

// Another live job holds the run directory. A ConfigError: the job's
// configuration names a directory in use, so running it again cannot help
// while that job lives, and a supervisor must not restart it (exit status 3,
// kExitBadInput): `meshtrain run` stops instead of retrying up to
// max_restarts times, and a scheduler's podFailurePolicy fails the job
// instead of requeueing it beside the running one.
struct RunDirBusyError : ConfigError {
  using ConfigError::ConfigError;
};

// Who holds (or last held) a lock, as its file records it.
struct RunDirHolder {
  std::string host;
  long pid = 0;
  long parent_pid = 0;
  std::string since;    // UTC, ISO 8601: when it took the lock
  std::string command;  // its command line, shortened
};

class RunDirLock {
 public:
  static constexpr const char* kFileName = ".meshtrain.lock";

  // Creates `dir` if needed, locks <dir>/.meshtrain.lock and records this
  // process in it. Throws RunDirBusyError naming the holder when another
  // process holds it; IoError when the directory or the file cannot be
  // created. On a file system without locks, warns on stderr and holds
  // nothing (held() false).
  explicit RunDirLock(const std::string& dir);
  ~RunDirLock();  // releases the lock; the file stays, recording the last holder
  RunDirLock(RunDirLock&& other) noexcept;
  RunDirLock& operator=(RunDirLock&&) = delete;
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

  bool held() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// The holder the lock file at `path` records; nullopt when there is no
// file or no complete record.
std::optional<RunDirHolder> read_run_dir_holder(const std::string& path);

}  // namespace meshtrain
