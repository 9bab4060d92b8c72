#pragma once
// When the supervisor (replica_supervisor.hpp) starts a failed replica or
// group again: a replica alone up to its own `restarts`, the whole group up
// to options.max_restarts, after a backoff that doubles per restart (at most
// options.max_restart_backoff). A failure that would only repeat (bad
// configuration or input, a diverged run) is never restarted.
#include <string>

#include "meshtrain/cluster/output_forwarder.hpp"
#include "meshtrain/cluster/replica_process.hpp"
#include "meshtrain/cluster/replica_supervisor.hpp"

namespace meshtrain {

class RestartPolicy {
 public:
  explicit RestartPolicy(const SupervisorOptions& options) : options_(options) {}

  int restarts() const { return restarts_; }  // whole-group restarts so far
  // False for an exit that fails again however often it is rerun.
  static bool retryable(int status);
  // c has restarts of its own left (the group is not being stopped).
  static bool may_restart_alone(const ReplicaProcess& c) {
    return retryable(c.status) && c.restarted < c.replica->restarts;
  }
  bool may_restart_group(bool retryable) const { return retryable && restarts_ < options_.max_restarts; }
  // What the others' stopping is for after a failure with this status:
  // "; stopping the others to restart the whole job", ...
  std::string stopping_note(int status) const;
  // Counts a group restart, says so, and waits out its backoff. Returns the
  // signal to us that cut it short, or 0.
  int wait_to_restart_group(OutputForwarder& forwarder);

 private:
  const SupervisorOptions& options_;
  int restarts_ = 0;
};

}  // namespace meshtrain
