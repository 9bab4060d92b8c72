#pragma once
// Runs the local processes of one job and watches them: every launcher
// (`launch`, `run`, `submit`) turns its job into a list of replicas and hands
// it here.
//
// Each replica's stdout and stderr are forwarded line by line with a
// "[label] " prefix. The job's outcome follows the replica kinds:
//   Worker     does the job's work; the job is done when every worker has
//              exited with status 0.
//   Service    serves the workers (parameter servers, reducers); needed
//              while they run, expected to exit once they are done.
//   Auxiliary  watches from the side (evaluators); its failure is reported
//              and fails the job at the end, but does not stop training.
// A replica with restarts > 0 that fails is started again alone, with the
// same command and environment, up to that many times (a parameter-server
// worker rejoins the running job); only then does its failure count.
// When a worker or service fails, the others are stopped: SIGTERM, then
// SIGKILL after `grace`. When the workers are done, services and auxiliaries
// get `drain` to finish by themselves (an evaluator evaluating the final
// checkpoint) before they are stopped the same way; a replica stopped on
// purpose is not a failure.
//
// Preemption: SIGINT, SIGTERM or SIGUSR1 to the supervisor stops every
// replica the same way, with `stop_grace` before SIGKILL: synchronous workers
// finish their step, checkpoint it and exit with kExitPreempted
// (train/loop/stop_request.hpp). A second signal is passed on, and they exit
// at once. A worker that exits with kExitPreempted by itself (the scheduler
// signalled it directly) stops the others the same way. When every worker
// checkpointed, the job's status is kExitPreempted (not a failure: resume it);
// it is never restarted here.
//
// Whole-group restarts: a synchronous job cannot go on without one of its
// members, so when a worker or service fails (after its own restarts, if it
// has any) and `max_restarts` allows, the supervisor stops the others, waits
// `restart_backoff` (doubled after each restart, at most
// `max_restart_backoff`) and starts every replica again, the auxiliaries
// included; the workers are expected to resume from their newest checkpoint.
// Each group gets MESHTRAIN_JOB_ID "<id>-r<k>" (k: restarts so far) so that
// its transports never meet what a dead group left behind. A replica that
// exits with kExitBadInput (core/error.hpp: bad configuration or input data)
// or kExitDiverged (a loss that is not finite) is restarted neither alone nor
// with its group: it would fail again.
//
// Heartbeats: with heartbeat_timeout > 0 each worker gets
// MESHTRAIN_HEARTBEAT_FILE (train/loop/heartbeat.hpp). A worker whose file was last
// touched more than heartbeat_timeout ago, or that has not touched it
// max(heartbeat_timeout, heartbeat_startup) after its start, is hung: it is
// killed with SIGKILL and counts as failed.
//
// Hangs (flight_dir set: the workers' flight recorder rings, comm/flight/):
// when a heartbeat goes stale, the rings are read first, and if they name
// the hang's culprit (comm/flight/hang_diagnosis.hpp: the rank the others
// wait for), that worker is killed instead of the first stale one found (a
// peer waiting for it stops beating too). When a group fails, the rings are
// read the same way; the culprit's line is printed then and heads the
// failure summary.
//
// When the job fails, the supervisor prints a summary: each replica that
// failed, how often, and its last lines of output.
//
// Its parts: replica_group.hpp (the processes and their output),
// heartbeat_watch.hpp (heartbeats and hang diagnosis), restart_policy.hpp
// and supervisor_summary.hpp (failures and the job's outcome).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace meshtrain {

enum class ReplicaKind { Worker, Service, Auxiliary };

struct Replica {
  std::string label;                // "rank 2", "worker 1", "evaluator 0": the output prefix and name in messages
  std::vector<std::string> argv;    // argv[0] is looked up on PATH
  std::vector<std::string> env;     // "NAME=value", over the supervisor's environment
  ReplicaKind kind = ReplicaKind::Worker;
  int restarts = 0;                 // times it is restarted alone after a failure
};

// Launch variables a child must not inherit from the supervisor's own
// environment (it may itself be a rank of an outer job): each replica's env
// sets the ones its launcher means it to have.
extern const std::vector<std::string> kLaunchVariables;

struct SupervisorOptions {
  std::string name = "launch";              // "[name] ..." in the supervisor's own lines
  std::chrono::milliseconds grace{5000};    // SIGTERM -> SIGKILL, stopping the others after a failure
  std::chrono::milliseconds stop_grace{25000};  // SIGTERM -> SIGKILL on a preemption (a signal to us)
  std::chrono::milliseconds drain{30000};   // workers done -> stop the rest
  int max_restarts = 0;                                 // whole-group restarts
  std::chrono::milliseconds restart_backoff{1000};      // before the first; doubles per restart
  std::chrono::milliseconds max_restart_backoff{30000};
  std::chrono::milliseconds heartbeat_timeout{0};       // 0: no heartbeats
  std::chrono::milliseconds heartbeat_startup{60000};   // allowance for the first beat
  std::string flight_dir;  // the workers' flight recorder rings (<training.out_dir>); empty: no hang diagnosis
};

// The failures of one replica over the whole job (all its restarts).
struct ReplicaFailures {
  std::string label;
  int count = 0;
  std::string last;                     // description of the latest one
  std::vector<std::string> last_lines;  // its last lines of output before the latest one
};

struct SupervisorResult {
  int exit_code = 0;     // 0 when the job succeeded
  int failed = -1;       // index of the replica whose failure ended the job, or -1
  std::string failure;   // "worker 2 exited with status 3", "rank 1 killed by signal 9 (Killed)"
  int restarts = 0;      // whole-group restarts done
  std::vector<ReplicaFailures> failures;  // in the order of each replica's first failure
  std::string summary;   // when the job failed: the failures, as printed at the end (lines)
  std::string culprit;   // the last group's hang culprit as the flight recorder named it; empty: none
};

// Starts every replica and runs the job to its end, restarts included.
// Throws Error when a replica cannot be started (a fork or pipe failure; a
// missing program is that replica exiting with status 127).
SupervisorResult supervise(const std::vector<Replica>& replicas, const SupervisorOptions& options,
                           std::FILE* out = stdout);

}  // namespace meshtrain
