#pragma once
// The local processes of one job's group as the supervisor runs them
// (replica_supervisor.hpp): each replica started with its own environment,
// their output forwarded, stopping them (a signal now, SIGKILL at a deadline)
// and collecting their exits. What the exits mean is the supervisor's.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "meshtrain/cluster/output_forwarder.hpp"
#include "meshtrain/cluster/replica_process.hpp"
#include "meshtrain/cluster/replica_supervisor.hpp"

namespace meshtrain {

class ReplicaGroup {
 public:
  ReplicaGroup(const std::vector<Replica>& replicas, OutputForwarder& forwarder, bool terminal);

  std::vector<ReplicaProcess>& processes() { return children_; }
  const std::vector<ReplicaProcess>& processes() const { return children_; }

  // Starts every replica afresh, nothing of the old processes kept;
  // `restarts`: whole-group restarts so far (they name the job id). When
  // one cannot be started, kills the others and throws Error naming `name`.
  void start_all(int restarts, const std::string& name);
  // Starts c's replica again alone, one more time than before.
  void restart_alone(ReplicaProcess& c, int restarts);

  // Forwards whatever output is ready, waiting up to timeout_ms for some.
  void pump(int timeout_ms) { pump_output(children_, forwarder_, timeout_ms); }
  // Output the children wrote just before exiting; a grandchild that still
  // holds the pipe open must not keep us waiting.
  void flush_remaining();
  // The indices of the children that exited since the last look, those
  // killed by a signal first (the likelier cause when a rank dies and its
  // peers fail over it a moment later).
  std::vector<size_t> collect_exited();

  int running() const;
  bool workers_ended() const;        // every worker exited
  bool workers_done() const;         // ... each with status 0
  bool workers_checkpointed() const;  // ... each with kExitPreempted or 0

  // `sig` to every worker still running, SIGKILL to everyone after `grace`.
  void stop_workers(int sig, std::chrono::milliseconds grace);
  // SIGTERM to every replica still running, SIGKILL after `grace`.
  void stop_all(std::chrono::milliseconds grace);
  // SIGTERM to every child still running, stopped or not (a second signal to us).
  void terminate_running();
  // SIGKILL to everyone still running `grace` from now, unless already set.
  void kill_after(std::chrono::milliseconds grace);
  bool kill_scheduled() const { return kill_at_.has_value(); }
  void cancel_kill() { kill_at_.reset(); }
  // Sends the scheduled SIGKILLs once their time has come.
  void kill_if_due();

 private:
  // Starts (or starts again) one replica, as group `restarts` runs it.
  void start(ReplicaProcess& c, int restarts);
  void kill_started_and_wait();

  OutputForwarder& forwarder_;
  bool terminal_;
  std::vector<ReplicaProcess> children_;
  std::optional<std::chrono::steady_clock::time_point> kill_at_;
};

}  // namespace meshtrain
