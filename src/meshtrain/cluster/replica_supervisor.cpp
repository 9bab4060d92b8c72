#include "meshtrain/cluster/replica_supervisor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include "meshtrain/cluster/output_forwarder.hpp"
#include "meshtrain/comm/flight/hang_report.hpp"
#include "meshtrain/core/error.hpp"

extern char** environ;

namespace meshtrain {

const std::vector<std::string> kLaunchVariables = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "MESHTRAIN_JOB_ID", "MESHTRAIN_JOB_TOKEN", "MESHTRAIN_NUM_SERVERS", "MESHTRAIN_NUM_REDUCERS",
    "MESHTRAIN_SERVER_ADDRS", "MESHTRAIN_TRANSPORT", "MESHTRAIN_PROGRESS_BAR", "CLUSTER_SPEC", "TF_CONFIG", "SLURM_PROCID",
    "OMPI_COMM_WORLD_RANK"};

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

volatile std::sig_atomic_t g_signal = 0;   // the first SIGINT, SIGTERM or SIGUSR1 to us
volatile std::sig_atomic_t g_signals = 0;  // how many
void on_signal(int sig) {
  if (!g_signal) g_signal = sig;
  g_signals = g_signals + 1;
}

// One running replica: its pid, the read ends of its output pipes, and the
// partial line of each stream not yet forwarded.
struct Child {
  const Replica* replica = nullptr;
  std::string heartbeat_file;  // empty: no heartbeats
  pid_t pid = -1;
  int fds[2] = {-1, -1};  // stdout, stderr
  std::string pending[2];
  bool exited = false;
  bool stopped = false;  // we sent it SIGTERM: its status is not a failure
  int status = 0;
  int restarted = 0;     // times started again alone after a failure, in this group
  Clock::time_point started;
  std::string hung;      // set when we killed it for missing heartbeats: why
};

// A failure that decides the job's outcome.
struct Failure {
  int index = -1;
  std::string what;
  int code = 0;
  bool retryable = true;  // false: bad configuration or input (kExitBadInput), or diverged (kExitDiverged)
};

bool exited_with(int status, int code) { return WIFEXITED(status) && WEXITSTATUS(status) == code; }

std::string describe(const std::string& label, int status) {
  if (WIFEXITED(status)) return label + " exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return label + " killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return label + " ended with status " + std::to_string(status);
}

bool failed(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }
int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g s", s);
  return buf;
}

// The child's environment: ours without the launch variables, then its own
// (`own`: the replica's env as this group runs it).
// Workers whose output reaches a terminal through us may draw a progress bar.
std::vector<std::string> child_environment(const Replica& r, const std::vector<std::string>& own, bool terminal) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    const std::string name = kv.substr(0, kv.find('='));
    bool drop = name == "MESHTRAIN_HEARTBEAT_FILE";  // an outer supervisor's: never ours to touch
    for (const auto& v : kLaunchVariables) drop = drop || name == v;
    for (const auto& mine : own) drop = drop || mine.compare(0, name.size() + 1, name + "=") == 0;
    if (!drop) env.push_back(std::move(kv));
  }
  env.insert(env.end(), own.begin(), own.end());
  if (terminal && r.kind == ReplicaKind::Worker) env.push_back("MESHTRAIN_PROGRESS_BAR=1");
  return env;
}

void spawn(Child& c, const std::vector<std::string>& own_env, bool terminal) {
  if (c.replica->argv.empty()) throw Error(c.replica->label + ": no command to run");
  // Everything the child needs is built before fork: between fork and exec
  // only async-signal-safe calls.
  const std::vector<std::string> env = child_environment(*c.replica, own_env, terminal);
  std::vector<char*> argv, envp;
  for (const auto& a : c.replica->argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& kv : env) envp.push_back(const_cast<char*>(kv.c_str()));
  envp.push_back(nullptr);
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) throw Error(std::string("pipe failed: ") + std::strerror(errno));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    throw Error(std::string("pipe failed: ") + std::strerror(errno));
  }
  pid_t pid = fork();
  if (pid < 0) throw Error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    // The supervisor's signal handlers must not carry over as "ignored".
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGUSR1, SIG_DFL);
    execvpe(argv[0], argv.data(), envp.data());
    const char* why = strerror(errno);
    (void)!write(STDERR_FILENO, "cannot run '", 12);
    (void)!write(STDERR_FILENO, argv[0], strlen(argv[0]));
    (void)!write(STDERR_FILENO, "': ", 3);
    (void)!write(STDERR_FILENO, why, strlen(why));
    (void)!write(STDERR_FILENO, "\n", 1);
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  c.pid = pid;
  c.fds[0] = out_pipe[0];
  c.fds[1] = err_pipe[0];
  c.started = Clock::now();
}

// Installs on_signal for SIGINT, SIGTERM and SIGUSR1 (Slurm's
// `--signal=B:USR1@120`) for the supervisor's lifetime.
class SignalScope {
 public:
  SignalScope() {
    g_signal = 0;
    g_signals = 0;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
    sigaction(SIGUSR1, &sa, &old_usr1_);
  }
  ~SignalScope() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGUSR1, &old_usr1_, nullptr);
  }

 private:
  struct sigaction old_int_ {}, old_term_ {}, old_usr1_ {};
};

// A private directory for the workers' heartbeat files, removed at the end.
class HeartbeatDir {
 public:
  HeartbeatDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/meshtrain-heartbeats.XXXXXX";
    if (!mkdtemp(tmpl.data())) throw Error("cannot create a directory for heartbeats: " + tmpl + ": " + std::strerror(errno));
    path_ = tmpl;
  }
  ~HeartbeatDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  // "worker 1" -> "<dir>/worker-1.hb"
  std::string file_for(std::string label) const {
    for (char& ch : label)
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '-';
    return path_ + "/" + label + ".hb";
  }

 private:
  std::string path_;
};

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
    SignalScope signals;
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
      while (Clock::now() < until && !g_signal) usleep(20000);
      if (g_signal) {
        signal_failure_ = Failure{-1, "stopped by signal " + std::to_string(g_signal), 128 + g_signal};
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
      pump(100);
      reap();
      check_heartbeats();
      if (g_signal && !signal_failure_) {
        signal_failure_ = Failure{-1, "stopped by signal " + std::to_string(g_signal), 128 + g_signal};
        forwarder_.line(options_.name, std::string(strsignal(g_signal)) + ": stopping the workers (they "
                                       "checkpoint the step in flight; SIGKILL in " +
                                       seconds_text(options_.stop_grace.count() / 1000.0) + ")");
        stop_workers(g_signal == SIGUSR1 ? SIGUSR1 : SIGTERM);
      }
      // The services (reducers, servers) serve the workers' last step: they
      // are stopped once every worker has ended.
      if ((signal_failure_ || preempted_) && !services_stopped_ && workers_ended()) {
        services_stopped_ = true;
        stop_all();
      }
      if (g_signals > 1 && !forwarded_second_) {
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
  static Child fresh(const Child& old) {
    Child c;
    c.replica = old.replica;
    c.heartbeat_file = old.heartbeat_file;
    return c;
  }

  // Starts (or starts again) one replica, as this group runs it.
  void start(Child& c) {
    std::vector<std::string> env = c.replica->env;
    if (result_.restarts > 0)
      for (auto& kv : env)
        if (kv.rfind("MESHTRAIN_JOB_ID=", 0) == 0) kv += "-r" + std::to_string(result_.restarts);
    if (!c.heartbeat_file.empty()) {
      unlink(c.heartbeat_file.c_str());  // a beat of an earlier process is no sign of this one's life
      env.push_back("MESHTRAIN_HEARTBEAT_FILE=" + c.heartbeat_file);
    }
    forwarder_.forget_recent_lines(c.replica->label);
    spawn(c, env, terminal_);
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
      struct stat st {};
      std::string why;
      if (stat(c.heartbeat_file.c_str(), &st) == 0) {
        // mtime is wall-clock time; the file system stamps it from the same clock.
        const auto last = std::chrono::system_clock::time_point(
            std::chrono::duration_cast<std::chrono::system_clock::duration>(
                std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
        const auto quiet = std::chrono::system_clock::now() - last;
        if (quiet > timeout)
          why = "sent no heartbeat for " + seconds_text(std::chrono::duration<double>(quiet).count()) +
                " (parallel.heartbeat_timeout_s " + seconds_text(timeout.count() / 1000.0) + ")";
      } else if (Clock::now() - c.started > first) {
        why = "sent no first heartbeat within " + seconds_text(first.count() / 1000.0) + " of its start";
      }
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

  // Forwards whatever output is ready, waiting up to timeout_ms for some.
  void pump(int timeout_ms) {
    std::vector<pollfd> pfds;
    std::vector<std::pair<size_t, int>> owner;  // (child, stream) per pollfd
    for (size_t i = 0; i < children_.size(); ++i)
      for (int s = 0; s < 2; ++s)
        if (children_[i].fds[s] >= 0) {
          pfds.push_back({children_[i].fds[s], POLLIN, 0});
          owner.push_back({i, s});
        }
    if (pfds.empty()) {
      usleep(static_cast<useconds_t>(timeout_ms) * 1000);
      return;
    }
    poll(pfds.data(), pfds.size(), timeout_ms);
    char buf[65536];
    for (size_t k = 0; k < pfds.size(); ++k) {
      if (!(pfds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto [i, s] = owner[k];
      Child& c = children_[i];
      ssize_t n = read(pfds[k].fd, buf, sizeof buf);
      if (n > 0) {
        forwarder_.feed(c.replica->label, c.pending[s], {buf, static_cast<size_t>(n)});
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        forwarder_.flush(c.replica->label, c.pending[s]);
        close(c.fds[s]);
        c.fds[s] = -1;
      }
    }
  }

  // Collects exited children and acts on their status.
  void reap() {
    // Collect first, then act: when a rank dies its peers fail on their own a
    // moment later, and of the children that ended since the last look, one
    // killed by a signal is the likelier cause, so it is handled (and named)
    // first. A failure while the group is being stopped is a consequence.
    std::vector<size_t> ended;
    for (size_t i = 0; i < children_.size(); ++i) {
      Child& c = children_[i];
      if (c.exited || c.pid <= 0 || waitpid(c.pid, &c.status, WNOHANG) != c.pid) continue;
      c.exited = true;
      ended.push_back(i);
    }
    std::stable_partition(ended.begin(), ended.end(), [&](size_t i) { return WIFSIGNALED(children_[i].status); });
    for (size_t i : ended) {
      Child& c = children_[i];
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
  void record_failure(Child& c, const std::string& what) {
    drain_output(c);  // its last words are still in the pipe
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
    for (auto& c : children_) drain_output(c);
  }

  void drain_output(Child& c) {
    char buf[65536];
    for (int s = 0; s < 2; ++s) {
      if (c.fds[s] < 0) continue;
      fcntl(c.fds[s], F_SETFL, fcntl(c.fds[s], F_GETFL) | O_NONBLOCK);
      ssize_t n;
      while ((n = read(c.fds[s], buf, sizeof buf)) > 0)
        forwarder_.feed(c.replica->label, c.pending[s], {buf, static_cast<size_t>(n)});
      forwarder_.flush(c.replica->label, c.pending[s]);
      close(c.fds[s]);
      c.fds[s] = -1;
    }
  }

  SupervisorOptions options_;
  std::FILE* out_;
  bool terminal_;
  OutputForwarder forwarder_;
  std::optional<HeartbeatDir> heartbeats_;
  std::vector<Child> children_;
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
