#include "meshtrain/cluster/replica_supervisor.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "meshtrain/cluster/heartbeat_files.hpp"
#include "meshtrain/cluster/output_forwarder.hpp"
#include "meshtrain/cluster/replica_process.hpp"
#include "meshtrain/cluster/supervisor_signals.hpp"
#include "meshtrain/comm/flight/hang_report.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain {

const std::vector<std::string> kLaunchVariables = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "MESHTRAIN_JOB_ID", "MESHTRAIN_JOB_TOKEN", "MESHTRAIN_NUM_SERVERS", "MESHTRAIN_NUM_REDUCERS",
    "MESHTRAIN_SERVER_ADDRS", "MESHTRAIN_TRANSPORT", "MESHTRAIN_PROGRESS_BAR", "CLUSTER_SPEC", "TF_CONFIG", "SLURM_PROCID",
    "OMPI_COMM_WORLD_RANK"};

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A failure that decides the job's outcome.
struct Failure {
  int index = -1;
  std::string what;
  int code = 0;
  bool retryable = true;  // false: bad configuration or input (kExitBadInput), or diverged (kExitDiverged)
};

// The job's outcome when signal `sig` stops it.
Failure signalled(int sig) { return Failure{-1, "stopped by signal " + std::to_string(sig), 128 + sig}; }

class Supervisor {
 public:
  Supervisor(const std::vector<Replica>& replicas, const SupervisorOptions& o, std::FILE* out)
      : options_(o),
        out_(out),
        terminal_(isatty(fileno(out)) == 1),
        forwarder_(out, terminal_),
        children_(replicas.size()) {
    if (options_.heartbeat_timeout.count() > 0) heartbeats_.emplace();
    for (size_t i = 0; i < replicas.size(); ++i) {
      children_[i].replica = &replicas[i];
      if (heartbeats_ && replicas[i].kind == ReplicaKind::Worker)
        children_[i].heartbeat_file = heartbeats_->file_for(replicas[i].label);
    }
  }

  SupervisorResult run() {
    SupervisorSignals signals;
    for (;;) {
      run_group();
      if (signal_failure_ || !group_failure_) break;
      if (result_.restarts >= options_.max_restarts || !group_failure_->retryable) break;
      // Backoff: a failure with a cause outside the job (a full disk, a busy
      // port) gets time to clear, and a job that fails at once does not spin.
      milliseconds backoff = options_.restart_backoff;
      for (int k = 0; k < result_.restarts && backoff < options_.max_restart_backoff; ++k) backoff *= 2;
      backoff = std::min(backoff, options_.max_restart_backoff);
      ++result_.restarts;
      forwarder_.line(options_.name, "restarting the whole job in " + seconds_text(backoff.count() / 1000.0) +
                                         " (restart " + std::to_string(result_.restarts) + " of " +
                                         std::to_string(options_.max_restarts) + ")");
      const auto until = Clock::now() + backoff;
      while (Clock::now() < until && !SupervisorSignals::first()) usleep(20000);
      if (SupervisorSignals::first()) {
        signal_failure_ = signalled(SupervisorSignals::first());
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
    culprit_.clear();
    diagnosed_ = culprit_killed_ = false;
    kill_at_.reset();
    drain_until_.reset();
    for (auto& c : children_) c = fresh(c);
    try {
      for (auto& c : children_) start(c);
    } catch (const Error& e) {
      for (auto& c : children_)
        if (c.pid > 0) kill(c.pid, SIGKILL);
      for (auto& c : children_)
        if (c.pid > 0) waitpid(c.pid, nullptr, 0);
      flush_remaining();
      throw Error(options_.name + ": cannot start the job's processes: " + e.what());
    }
    while (running() > 0) {
      pump_output(children_, forwarder_, 100);
      reap();
      check_heartbeats();
      if (const int sig = SupervisorSignals::first(); sig && !signal_failure_) {
        signal_failure_ = signalled(sig);
        forwarder_.line(options_.name, std::string(strsignal(sig)) + ": stopping the workers (they "
                                       "checkpoint the step in flight; SIGKILL in " +
                                       seconds_text(options_.stop_grace.count() / 1000.0) + ")");
        stop_workers(sig == SIGUSR1 ? SIGUSR1 : SIGTERM);
      }
      // The services (reducers, servers) serve the workers' last step: they
      // are stopped once every worker has ended.
      if ((signal_failure_ || preempted_) && !services_stopped_ && workers_ended()) {
        services_stopped_ = true;
        stop_all();
      }
      if (SupervisorSignals::received() > 1 && !forwarded_second_) {
        // A second signal: the workers exit at once (stop_request.hpp).
        forwarded_second_ = true;
        for (auto& c : children_)
          if (!c.exited && c.pid > 0) kill(c.pid, SIGTERM);
      }
      if (!drain_until_ && !kill_at_ && workers_done()) drain_until_ = Clock::now() + options_.drain;
      if (drain_until_ && !kill_at_ && Clock::now() > *drain_until_ && running() > 0) {
        forwarder_.line(options_.name, "the workers finished " + std::to_string(options_.drain.count() / 1000) +
                                           " s ago; stopping the rest");
        stop_all();
      }
      if (kill_at_ && Clock::now() > *kill_at_) {
        for (auto& c : children_)
          if (!c.exited) kill(c.pid, SIGKILL);
        kill_at_.reset();
      }
    }
    flush_remaining();
  }

  // A child to start again: the same replica, nothing of the old process.
  static ReplicaProcess fresh(const ReplicaProcess& old) {
    ReplicaProcess c;
    c.replica = old.replica;
    c.heartbeat_file = old.heartbeat_file;
    return c;
  }

  // Starts (or starts again) one replica, as this group runs it.
  void start(ReplicaProcess& c) {
    std::vector<std::string> env = c.replica->env;
    if (result_.restarts > 0)
      for (auto& kv : env)
        if (kv.rfind("MESHTRAIN_JOB_ID=", 0) == 0) kv += "-r" + std::to_string(result_.restarts);
    if (!c.heartbeat_file.empty()) {
      unlink(c.heartbeat_file.c_str());  // a beat of an earlier process is no sign of this one's life
      env.push_back("MESHTRAIN_HEARTBEAT_FILE=" + c.heartbeat_file);
    }
    forwarder_.forget_recent_lines(c.replica->label);
    spawn_replica(c, env, terminal_);
  }

  int running() const {
    int n = 0;
    for (const auto& c : children_) n += !c.exited;
    return n;
  }

  // Every worker ended by checkpointing and exiting (kExitPreempted or 0).
  bool workers_checkpointed() const {
    for (const auto& c : children_)
      if (c.replica->kind == ReplicaKind::Worker &&
          (!c.exited || !(exited_with(c.status, kExitPreempted) || exited_with(c.status, 0))))
        return false;
    return true;
  }

  bool workers_done() const {
    for (const auto& c : children_)
      if (c.replica->kind == ReplicaKind::Worker && (!c.exited || failed(c.status))) return false;
    return true;
  }

  // A preemption: `sig` (SIGTERM, or the SIGUSR1 we were sent) to every
  // worker still running, SIGKILL to everyone after stop_grace.
  void stop_workers(int sig) {
    for (auto& c : children_)
      if (c.replica->kind == ReplicaKind::Worker && !c.exited && !c.stopped && c.pid > 0) {
        kill(c.pid, sig);
        c.stopped = true;
      }
    if (!kill_at_) kill_at_ = Clock::now() + options_.stop_grace;
  }

  bool workers_ended() const {
    for (const auto& c : children_)
      if (c.replica->kind == ReplicaKind::Worker && !c.exited) return false;
    return true;
  }

  // SIGTERM to every replica still running, SIGKILL after `grace`.
  void stop_all(milliseconds grace, int sig = SIGTERM) {
    for (auto& c : children_)
      if (!c.exited && !c.stopped && c.pid > 0) {
        kill(c.pid, sig);
        c.stopped = true;
      }
    if (!kill_at_) kill_at_ = Clock::now() + grace;
  }
  void stop_all() { stop_all(options_.grace); }

  // Kills every running worker whose heartbeat is overdue (reap() then
  // treats it as failed).
  void check_heartbeats() {
    if (!heartbeats_) return;
    const milliseconds timeout = options_.heartbeat_timeout;
    const milliseconds first = std::max(timeout, options_.heartbeat_startup);
    if (culprit_killed_) return;  // the group goes down with its hang's culprit
    for (auto& c : children_) {
      if (c.heartbeat_file.empty() || c.exited || c.stopped || !c.hung.empty()) continue;
      const std::string why = overdue_heartbeat(c.heartbeat_file, c.started, timeout, first);
      if (why.empty()) continue;
      // The peers waiting for a hung worker stop beating too: the flight
      // recorder's rings tell which one the others wait for.
      const double min_wait = std::min(1.0, timeout.count() / 4000.0);
      if (kill_culprits(diagnose_hang(min_wait), c.replica->label + " " + why)) {
        reap();  // the culprit's death first, before its peers fail over it
        return;
      }
      c.hung = why;
      kill(c.pid, SIGKILL);
    }
  }

  // Reads the workers' rings once per group (options_.flight_dir) and
  // prints the hang's culprit, if they name one. Returns the culprits' ranks.
  std::vector<int> diagnose_hang(double min_wait_s) {
    if (options_.flight_dir.empty() || diagnosed_) return {};
    diagnosed_ = true;
    comm::flight::HangReport report;
    try {
      report = comm::flight::diagnose_run_dir(options_.flight_dir, min_wait_s);
    } catch (const Error&) {
      return {};  // no rings (yet): nothing to say
    }
    const comm::flight::Diagnosis& d = report.diagnosis;
    if (d.finding == comm::flight::Finding::NoHang) return {};
    culprit_ = (d.named() ? "hang " : "") + d.summary;  // "hang culprit: rank 1 ...", "hang: no single culprit: ..."
    forwarder_.line(options_.name, culprit_);
    for (const std::string& line : d.details) forwarder_.line(options_.name, "  " + line);
    size_t start = 0;
    for (size_t end; (end = report.table.find('\n', start)) != std::string::npos; start = end + 1)
      forwarder_.line(options_.name, "  " + report.table.substr(start, end - start));
    return d.culprits;
  }

  // Kills the running workers of these ranks as hung; false when none is
  // running (then nothing was done).
  bool kill_culprits(const std::vector<int>& ranks, const std::string& noticed) {
    bool killed = false;
    for (auto& c : children_) {
      if (c.exited || c.stopped || c.pid <= 0 || c.replica->kind != ReplicaKind::Worker) continue;
      const int rank = rank_of(*c.replica);
      if (rank < 0 || std::find(ranks.begin(), ranks.end(), rank) == ranks.end()) continue;
      c.hung = "is the hang's culprit (" + noticed + "; the flight recorder names rank " + std::to_string(rank) + ")";
      kill(c.pid, SIGKILL);
      siginfo_t info{};
      waitid(P_PID, id_t(c.pid), &info, WEXITED | WNOWAIT);  // dead, left for reap()
      killed = true;
    }
    culprit_killed_ = killed;
    return killed;
  }

  // The RANK its environment gives a replica; -1 when none.
  static int rank_of(const Replica& r) {
    for (const auto& kv : r.env)
      if (kv.rfind("RANK=", 0) == 0) return std::atoi(kv.c_str() + 5);
    return -1;
  }

  // Collects exited children and acts on their status.
  void reap() {
    // Collect first, then act: when a rank dies its peers fail on their own a
    // moment later, and of the children that ended since the last look, one
    // killed by a signal is the likelier cause, so it is handled (and named)
    // first. A failure while the group is being stopped is a consequence.
    std::vector<size_t> ended;
    for (size_t i = 0; i < children_.size(); ++i) {
      ReplicaProcess& c = children_[i];
      if (c.exited || c.pid <= 0 || waitpid(c.pid, &c.status, WNOHANG) != c.pid) continue;
      c.exited = true;
      ended.push_back(i);
    }
    std::stable_partition(ended.begin(), ended.end(), [&](size_t i) { return WIFSIGNALED(children_[i].status); });
    for (size_t i : ended) {
      ReplicaProcess& c = children_[i];
      const bool stopping = c.stopped || group_failure_ || signal_failure_ || preempted_;
      if (exited_with(c.status, kExitPreempted) && c.hung.empty()) {
        // It was told to stop (by us or by the scheduler directly) and
        // checkpointed: the job stops, to be resumed, not restarted. The
        // other workers agreed on the same step and are checkpointing it:
        // a signal now would be their second, which exits at once. They get
        // stop_grace before SIGKILL.
        if (!stopping) {
          forwarder_.line(options_.name, c.replica->label + " was preempted and checkpointed; the others stop at "
                                         "the same step");
          if (!kill_at_) kill_at_ = Clock::now() + options_.stop_grace;
        }
        preempted_ = true;
        continue;
      }
      // A hung worker we killed is a failure even if the group is being
      // stopped anyway.
      if (c.hung.empty() && (stopping || !failed(c.status))) continue;
      const std::string what = c.hung.empty() ? describe(c.replica->label, c.status)
                                              : c.replica->label + " " + c.hung + "; killed it";
      record_failure(c, what);
      if (stopping) continue;
      // Bad configuration or input fails again however often it is rerun,
      // and a diverged run diverges again from the same checkpoint.
      const bool diverged = exited_with(c.status, kExitDiverged);
      const bool retryable = !exited_with(c.status, kExitBadInput) && !diverged;
      if (retryable && c.restarted < c.replica->restarts && !kill_at_) {
        forwarder_.line(options_.name, what + "; restarting it alone (" + std::to_string(c.restarted + 1) + " of " +
                                           std::to_string(c.replica->restarts) + ")");
        const int restarted = c.restarted + 1;
        c = fresh(c);
        c.restarted = restarted;
        start(c);
        continue;
      }
      const Failure failure{static_cast<int>(i), what, exit_code_of(c.status), retryable};
      if (c.replica->kind == ReplicaKind::Auxiliary) {
        forwarder_.line(options_.name, what + "; the others continue");
        if (!aux_failure_) aux_failure_ = failure;
        continue;
      }
      group_failure_ = failure;
      if (c.replica->kind == ReplicaKind::Worker) diagnose_hang(1.0);  // before the others are stopped
      const bool restart = retryable && result_.restarts < options_.max_restarts;
      forwarder_.line(options_.name, what + (restart    ? "; stopping the others to restart the whole job"
                                             : retryable ? "; stopping the others"
                                             : diverged  ? " (the training diverged: not restarted); stopping the others"
                                                         : " (bad configuration or input: not restarted); "
                                                           "stopping the others"));
      stop_all();
    }
    std::fflush(out_);
  }

  // Counts a failure of c and keeps its last lines for the summary.
  void record_failure(ReplicaProcess& c, const std::string& what) {
    drain_output(c, forwarder_);  // its last words are still in the pipe
    auto it = std::find_if(result_.failures.begin(), result_.failures.end(),
                           [&](const ReplicaFailures& f) { return f.label == c.replica->label; });
    if (it == result_.failures.end()) {
      result_.failures.emplace_back();
      it = result_.failures.end() - 1;
      it->label = c.replica->label;
    }
    ++it->count;
    it->last = what;
    it->last_lines = forwarder_.recent_lines(c.replica->label);
  }

  // The job's outcome: a signal to us, else the failure that stopped the last
  // group, else an auxiliary's; and the summary of every failure.
  void finish() {
    if (!group_failure_ && !aux_failure_ && (preempted_ || signal_failure_) && workers_checkpointed()) {
      // Preempted: every worker saved the step it was in. A scheduler
      // tells this status from a failure and requeues the job.
      result_.exit_code = kExitPreempted;
      result_.failure = signal_failure_ ? signal_failure_->what : "preempted";
      forwarder_.line(options_.name, "preempted: every worker wrote a checkpoint of its last step; the job resumes "
                                     "from it when started again (exit status " +
                                         std::to_string(kExitPreempted) + ")");
      return;
    }
    const std::optional<Failure>& f = signal_failure_ ? signal_failure_ : group_failure_ ? group_failure_ : aux_failure_;
    if (!f) {
      if (!preempted_) return;
      // Preempted, but a worker ended otherwise: its checkpoint is missing.
      for (const auto& c : children_)
        if (c.replica->kind == ReplicaKind::Worker && !exited_with(c.status, kExitPreempted) &&
            !exited_with(c.status, 0)) {
          result_.exit_code = exit_code_of(c.status);
          result_.failure = "preempted, but " + describe(c.replica->label, c.status) +
                            " before its checkpoint was written";
          forwarder_.line(options_.name, result_.failure + "; the job resumes from its newest complete checkpoint");
          return;
        }
      return;
    }
    result_.exit_code = f->code;
    result_.failed = f->index;
    result_.failure = f->what;
    if (result_.failures.empty()) return;
    std::vector<std::string> lines;
    std::string head = "the job failed: " + f->what;
    if (options_.max_restarts > 0)
      head += " (after " + std::to_string(result_.restarts) + " of " + std::to_string(options_.max_restarts) +
              " restarts of the whole job)";
    result_.culprit = culprit_;
    if (!culprit_.empty()) lines.push_back(culprit_);  // first: who the others waited for
    lines.push_back(head);
    for (const auto& r : result_.failures) {
      lines.push_back("  " + r.label + " failed " + std::to_string(r.count) + (r.count == 1 ? " time" : " times") +
                      "; last: " + r.last + (r.last_lines.empty() ? "; no output" : "; its last lines:"));
      for (const auto& l : r.last_lines) lines.push_back("    | " + l);
    }
    for (const auto& l : lines) {
      forwarder_.line(options_.name, l);
      result_.summary += l + "\n";
    }
  }

  // Output a child wrote just before exiting; a grandchild that still holds
  // the pipe open must not keep us waiting.
  void flush_remaining() {
    for (auto& c : children_) drain_output(c, forwarder_);
  }

  SupervisorOptions options_;
  std::FILE* out_;
  bool terminal_;
  OutputForwarder forwarder_;
  std::optional<HeartbeatDir> heartbeats_;
  std::vector<ReplicaProcess> children_;
  SupervisorResult result_;
  std::optional<Clock::time_point> kill_at_, drain_until_;
  std::optional<Failure> group_failure_;   // the failure that stops the running group
  std::optional<Failure> aux_failure_;     // the first auxiliary failure of the job
  std::optional<Failure> signal_failure_;  // SIGINT, SIGTERM or SIGUSR1 to us
  std::string culprit_;          // this group's hang culprit, as the flight recorder named it
  bool diagnosed_ = false;       // the rings were read for this group
  bool culprit_killed_ = false;  // ... and the culprit killed on a stale heartbeat
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
