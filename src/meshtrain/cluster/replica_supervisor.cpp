#include "meshtrain/cluster/replica_supervisor.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <optional>

#include "meshtrain/cluster/heartbeat_watch.hpp"
#include "meshtrain/cluster/output_forwarder.hpp"
#include "meshtrain/cluster/replica_group.hpp"
#include "meshtrain/cluster/replica_process.hpp"
#include "meshtrain/cluster/restart_policy.hpp"
#include "meshtrain/cluster/supervisor_signals.hpp"
#include "meshtrain/cluster/supervisor_summary.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain {

const std::vector<std::string> kLaunchVariables = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "MESHTRAIN_JOB_ID", "MESHTRAIN_JOB_TOKEN", "MESHTRAIN_NUM_SERVERS", "MESHTRAIN_NUM_REDUCERS",
    "MESHTRAIN_SERVER_ADDRS", "MESHTRAIN_TRANSPORT", "MESHTRAIN_PROGRESS_BAR", "CLUSTER_SPEC", "TF_CONFIG", "SLURM_PROCID",
    "OMPI_COMM_WORLD_RANK"};

namespace {

using Clock = std::chrono::steady_clock;

// The job's outcome when signal `sig` stops it.
Failure signalled(int sig) { return Failure{-1, "stopped by signal " + std::to_string(sig), 128 + sig}; }

// Runs the job's groups and decides what each exit means; the processes,
// the heartbeats, the restart policy and the summary are its parts'.
class Supervisor {
 public:
  Supervisor(const std::vector<Replica>& replicas, const SupervisorOptions& o, std::FILE* out)
      : options_(o),
        out_(out),
        terminal_(isatty(fileno(out)) == 1),
        forwarder_(out, terminal_),
        group_(replicas, forwarder_, terminal_),
        heartbeats_(options_, forwarder_),
        restarts_(options_),
        summary_(options_, forwarder_) {
    heartbeats_.assign_files(group_.processes());
  }

  SupervisorResult run() {
    SupervisorSignals signals;
    for (;;) {
      run_group();
      if (signal_failure_ || !group_failure_) break;
      if (!restarts_.may_restart_group(group_failure_->retryable)) break;
      if (const int sig = restarts_.wait_to_restart_group(forwarder_)) {
        signal_failure_ = signalled(sig);
        break;
      }
    }
    finish();
    return result_;
  }

 private:
  // Starts every replica and runs them until all have exited. Leaves the
  // group's failure, if any, in group_failure_.
  void run_group() {
    group_failure_.reset();
    heartbeats_.new_group();
    group_.cancel_kill();
    drain_until_.reset();
    group_.start_all(restarts_.restarts(), options_.name);
    while (group_.running() > 0) {
      group_.pump(100);
      reap();
      if (heartbeats_.kill_hung(group_.processes())) reap();  // the culprit's death first
      stop_workers_on_first_signal();
      stop_services_once_workers_ended();
      pass_on_second_signal();
      stop_the_rest_after_drain();
      group_.kill_if_due();
    }
    group_.flush_remaining();
  }

  // A preemption: SIGTERM, or the SIGUSR1 we were sent, to every worker
  // still running; SIGKILL to everyone after stop_grace.
  void stop_workers_on_first_signal() {
    const int sig = SupervisorSignals::first();
    if (!sig || signal_failure_) return;
    signal_failure_ = signalled(sig);
    forwarder_.line(options_.name, std::string(strsignal(sig)) + ": stopping the workers (they "
                                   "checkpoint the step in flight; SIGKILL in " +
                                   seconds_text(options_.stop_grace.count() / 1000.0) + ")");
    group_.stop_workers(sig == SIGUSR1 ? SIGUSR1 : SIGTERM, options_.stop_grace);
  }

  // The services (reducers, servers) serve the workers' last step: they
  // are stopped once every worker has ended.
  void stop_services_once_workers_ended() {
    if ((signal_failure_ || preempted_) && !services_stopped_ && group_.workers_ended()) {
      services_stopped_ = true;
      group_.stop_all(options_.grace);
    }
  }

  // A second signal: the workers exit at once (stop_request.hpp).
  void pass_on_second_signal() {
    if (SupervisorSignals::received() > 1 && !forwarded_second_) {
      forwarded_second_ = true;
      group_.terminate_running();
    }
  }

  // The workers are done: services and auxiliaries get `drain` to finish
  // by themselves before they are stopped.
  void stop_the_rest_after_drain() {
    if (!drain_until_ && !group_.kill_scheduled() && group_.workers_done())
      drain_until_ = Clock::now() + options_.drain;
    if (drain_until_ && !group_.kill_scheduled() && Clock::now() > *drain_until_ && group_.running() > 0) {
      forwarder_.line(options_.name, "the workers finished " + std::to_string(options_.drain.count() / 1000) +
                                         " s ago; stopping the rest");
      group_.stop_all(options_.grace);
    }
  }

  // Collects exited children and acts on their status. A failure while the
  // group is being stopped is a consequence.
  void reap() {
    for (size_t i : group_.collect_exited()) on_exit(i);
    std::fflush(out_);
  }

  void on_exit(size_t i) {
    ReplicaProcess& c = group_.processes()[i];
    const bool stopping = c.stopped || group_failure_ || signal_failure_ || preempted_;
    if (exited_with(c.status, kExitPreempted) && c.hung.empty()) {
      on_preempted(c, stopping);
      return;
    }
    // A hung worker we killed is a failure even if the group is being
    // stopped anyway.
    if (c.hung.empty() && (stopping || !failed(c.status))) return;
    const std::string what = c.hung.empty() ? describe(c.replica->label, c.status)
                                            : c.replica->label + " " + c.hung + "; killed it";
    summary_.record_failure(c, what);
    if (!stopping) on_failure(i, c, what);
  }

  // It was told to stop (by us or by the scheduler directly) and
  // checkpointed: the job stops, to be resumed, not restarted. The other
  // workers agreed on the same step and are checkpointing it: a signal now
  // would be their second, which exits at once. They get stop_grace before
  // SIGKILL.
  void on_preempted(const ReplicaProcess& c, bool stopping) {
    if (!stopping) {
      forwarder_.line(options_.name, c.replica->label + " was preempted and checkpointed; the others stop at "
                                     "the same step");
      group_.kill_after(options_.stop_grace);
    }
    preempted_ = true;
  }

  // A failure that is not a consequence of stopping: the replica restarts
  // alone if it may, an auxiliary's is noted, anything else stops the group.
  void on_failure(size_t i, ReplicaProcess& c, const std::string& what) {
    if (RestartPolicy::may_restart_alone(c) && !group_.kill_scheduled()) {
      forwarder_.line(options_.name, what + "; restarting it alone (" + std::to_string(c.restarted + 1) + " of " +
                                         std::to_string(c.replica->restarts) + ")");
      group_.restart_alone(c, restarts_.restarts());
      return;
    }
    const Failure failure{static_cast<int>(i), what, exit_code_of(c.status), RestartPolicy::retryable(c.status)};
    if (c.replica->kind == ReplicaKind::Auxiliary) {
      forwarder_.line(options_.name, what + "; the others continue");
      if (!aux_failure_) aux_failure_ = failure;
      return;
    }
    group_failure_ = failure;
    if (c.replica->kind == ReplicaKind::Worker) heartbeats_.diagnose_hang(1.0);  // before the others are stopped
    forwarder_.line(options_.name, what + restarts_.stopping_note(c.status));
    group_.stop_all(options_.grace);
  }

  // The job's outcome: a signal to us, else the failure that stopped the last
  // group, else an auxiliary's; and the summary of every failure.
  void finish() {
    result_.restarts = restarts_.restarts();
    result_.failures = summary_.failures();
    if (!group_failure_ && !aux_failure_ && (preempted_ || signal_failure_) && group_.workers_checkpointed()) {
      summary_.report_preempted(signal_failure_ ? signal_failure_->what : "preempted", result_);
      return;
    }
    const std::optional<Failure>& f = signal_failure_ ? signal_failure_ : group_failure_ ? group_failure_ : aux_failure_;
    if (f)
      summary_.report_failure(*f, heartbeats_.culprit(), result_);
    else if (preempted_)
      summary_.report_missing_checkpoint(group_.processes(), result_);
  }

  SupervisorOptions options_;
  std::FILE* out_;
  bool terminal_;
  OutputForwarder forwarder_;
  ReplicaGroup group_;
  HeartbeatWatch heartbeats_;
  RestartPolicy restarts_;
  SupervisorSummary summary_;
  SupervisorResult result_;
  std::optional<Clock::time_point> drain_until_;
  std::optional<Failure> group_failure_;   // the failure that stops the running group
  std::optional<Failure> aux_failure_;     // the first auxiliary failure of the job
  std::optional<Failure> signal_failure_;  // SIGINT, SIGTERM or SIGUSR1 to us
  bool preempted_ = false;                 // a worker exited with kExitPreempted
  bool forwarded_second_ = false;          // a second signal to us went on to the replicas
  bool services_stopped_ = false;          // after a preemption, once the workers ended
};

}  // namespace

SupervisorResult supervise(const std::vector<Replica>& replicas, const SupervisorOptions& options, std::FILE* out) {
  if (replicas.empty()) throw Error(options.name + ": no processes to start");
  return Supervisor(replicas, options, out).run();
}

}  // namespace meshtrain
