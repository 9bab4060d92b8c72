#pragma once
// A worker's sign of life for its supervisor (`meshtrain run`): the
// supervisor names a file in MESHTRAIN_HEARTBEAT_FILE and kills a worker
// whose file has not been touched for parallel.heartbeat_timeout_s (a hung
// collective, a deadlock, a stuck file system), which an exit status alone
// would never show. Without the variable every call is a no-op.
//
// The trainer calls beat() once per step. It touches the file's mtime at most
// once per second (one futimens on a descriptor kept open; the file is
// created by the first beat, so time spent before the first step falls under
// the supervisor's longer startup allowance), and never allocates.
#include <chrono>
#include <string>

namespace meshtrain {

class Heartbeat {
 public:
  Heartbeat();                           // from MESHTRAIN_HEARTBEAT_FILE; no-op when unset or empty
  explicit Heartbeat(std::string path);  // empty: no-op
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  void beat();
  bool enabled() const { return !path_.empty(); }

 private:
  std::string path_;
  int fd_ = -1;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace meshtrain
