#pragma once
// The supervisor's watch for hung workers (replica_supervisor.hpp): each
// worker's heartbeat file, the test of whether it is overdue, and the
// flight recorder's rings (options.flight_dir), read once per group, that
// name the hang's culprit. One group at a time.
#include <optional>
#include <string>
#include <vector>

#include "meshtrain/cluster/heartbeat_files.hpp"
#include "meshtrain/cluster/output_forwarder.hpp"
#include "meshtrain/cluster/replica_process.hpp"
#include "meshtrain/cluster/replica_supervisor.hpp"

namespace meshtrain {

class HeartbeatWatch {
 public:
  // Makes the heartbeat directory when options.heartbeat_timeout > 0
  // (Error when it cannot); `forwarder` prints the diagnosis.
  HeartbeatWatch(const SupervisorOptions& options, OutputForwarder& forwarder);

  // Gives every worker its heartbeat file (none without heartbeats).
  void assign_files(std::vector<ReplicaProcess>& processes) const;
  // Forgets the last group's diagnosis.
  void new_group();
  // Kills every running worker whose heartbeat is overdue (reaping then
  // treats it as failed), or the hang's culprit instead when the rings name
  // one. True when it killed the culprit: the caller reaps it at once,
  // before its peers fail over it.
  bool kill_hung(std::vector<ReplicaProcess>& processes);
  // Reads the rings once per group and prints the hang's culprit, if they
  // name one. Returns the culprits' ranks.
  std::vector<int> diagnose_hang(double min_wait_s);
  // This group's culprit as the flight recorder named it; empty: none.
  const std::string& culprit() const { return culprit_; }

 private:
  bool kill_culprits(std::vector<ReplicaProcess>& processes, const std::vector<int>& ranks,
                     const std::string& noticed);

  const SupervisorOptions& options_;
  OutputForwarder& forwarder_;
  std::optional<HeartbeatDir> dir_;
  std::string culprit_;
  bool diagnosed_ = false;       // the rings were read for this group
  bool culprit_killed_ = false;  // ... and the culprit killed on a stale heartbeat
};

}  // namespace meshtrain
