#pragma once
// The workers' heartbeat files as the supervisor watches them
// (train/loop/heartbeat.hpp writes them): a private directory, one file per
// worker, and the test of whether a worker's beat is overdue.
#include <chrono>
#include <string>

namespace meshtrain {

// A private directory for the workers' heartbeat files, removed at the end.
class HeartbeatDir {
 public:
  HeartbeatDir();  // Error when it cannot be made
  ~HeartbeatDir();
  HeartbeatDir(const HeartbeatDir&) = delete;
  HeartbeatDir& operator=(const HeartbeatDir&) = delete;
  // "worker 1" -> "<dir>/worker-1.hb"
  std::string file_for(std::string label) const;

 private:
  std::string path_;
};

// Why the worker started at `started` with heartbeat file `file` counts as
// hung: its file not touched for `timeout`, or never touched within `first`
// of its start. Empty when it is not.
std::string overdue_heartbeat(const std::string& file, std::chrono::steady_clock::time_point started,
                              std::chrono::milliseconds timeout, std::chrono::milliseconds first);

}  // namespace meshtrain
