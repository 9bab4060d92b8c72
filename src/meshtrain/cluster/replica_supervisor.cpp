#include "meshtrain/cluster/replica_supervisor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <optional>

#include "meshtrain/cluster/output_forwarder.hpp"
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

volatile std::sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

// One running replica: its pid, the read ends of its output pipes, and the
// partial line of each stream not yet forwarded.
struct Child {
  const Replica* replica = nullptr;
  pid_t pid = -1;
  int fds[2] = {-1, -1};  // stdout, stderr
  std::string pending[2];
  bool exited = false;
  bool stopped = false;  // we sent it SIGTERM: its status is not a failure
  int status = 0;
  int restarted = 0;     // times started again after a failure
};

std::string describe(const std::string& label, int status) {
  if (WIFEXITED(status)) return label + " exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return label + " killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return label + " ended with status " + std::to_string(status);
}

bool failed(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }
int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// The child's environment: ours without the launch variables, then its own.
// Workers whose output reaches a terminal through us may draw a progress bar.
std::vector<std::string> child_environment(const Replica& r, bool terminal) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    const std::string name = kv.substr(0, kv.find('='));
    bool drop = false;
    for (const auto& v : kLaunchVariables) drop = drop || name == v;
    for (const auto& mine : r.env) drop = drop || mine.compare(0, name.size() + 1, name + "=") == 0;
    if (!drop) env.push_back(std::move(kv));
  }
  env.insert(env.end(), r.env.begin(), r.env.end());
  if (terminal && r.kind == ReplicaKind::Worker) env.push_back("MESHTRAIN_PROGRESS_BAR=1");
  return env;
}

void spawn(Child& c, bool terminal) {
  if (c.replica->argv.empty()) throw Error(c.replica->label + ": no command to run");
  // Everything the child needs is built before fork: between fork and exec
  // only async-signal-safe calls.
  const std::vector<std::string> env = child_environment(*c.replica, terminal);
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
}

// Installs on_signal for SIGINT and SIGTERM for the supervisor's lifetime.
class SignalScope {
 public:
  SignalScope() {
    g_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~SignalScope() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

class Supervisor {
 public:
  Supervisor(const std::vector<Replica>& replicas, const SupervisorOptions& o, std::FILE* out)
      : options_(o),
        out_(out),
        terminal_(isatty(fileno(out)) == 1),
        forwarder_(out, terminal_),
        children_(replicas.size()) {
    for (size_t i = 0; i < replicas.size(); ++i) children_[i].replica = &replicas[i];
  }

  SupervisorResult run() {
    SignalScope signals;
    try {
      for (auto& c : children_) spawn(c, terminal_);
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
      if (g_signal && !signal_seen_) {
        signal_seen_ = true;
        note_failure(-1, "stopped by signal " + std::to_string(g_signal), 128 + g_signal);
        stop_all();
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
    return result_;
  }

 private:
  int running() const {
    int n = 0;
    for (const auto& c : children_) n += !c.exited;
    return n;
  }

  bool workers_done() const {
    for (const auto& c : children_)
      if (c.replica->kind == ReplicaKind::Worker && (!c.exited || failed(c.status))) return false;
    return true;
  }

  void note_failure(int index, const std::string& what, int code) {
    if (result_.exit_code != 0) return;
    result_.failed = index;
    result_.failure = what;
    result_.exit_code = code;
  }

  void stop_all() {
    for (auto& c : children_)
      if (!c.exited && !c.stopped && c.pid > 0) {
        kill(c.pid, SIGTERM);
        c.stopped = true;
      }
    if (!kill_at_) kill_at_ = Clock::now() + options_.grace;
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

  // Collects exited children and acts on their status; returns how many run.
  int reap() {
    for (size_t i = 0; i < children_.size(); ++i) {
      Child& c = children_[i];
      int status = 0;
      if (c.exited || c.pid <= 0) {
        c.exited = true;
        continue;
      }
      if (waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
      c.exited = true;
      c.status = status;
      if (c.stopped || !failed(status)) continue;
      const std::string what = describe(c.replica->label, status);
      if (c.restarted < c.replica->restarts && !kill_at_ && !signal_seen_) {
        ++c.restarted;
        forwarder_.line(options_.name, what + "; restarting it alone (" + std::to_string(c.restarted) + " of " +
                                           std::to_string(c.replica->restarts) + ")");
        drain_output(c);
        c.exited = false;
        spawn(c, terminal_);
        continue;
      }
      if (c.replica->kind == ReplicaKind::Auxiliary) {
        forwarder_.line(options_.name, what + "; the others continue");
        note_failure(static_cast<int>(i), what, exit_code_of(status));
        continue;
      }
      forwarder_.line(options_.name, what + "; stopping the others");
      note_failure(static_cast<int>(i), what, exit_code_of(status));
      stop_all();
    }
    std::fflush(out_);
    return running();
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
  std::vector<Child> children_;
  SupervisorResult result_;
  std::optional<Clock::time_point> kill_at_, drain_until_;
  bool signal_seen_ = false;
};

}  // namespace

SupervisorResult supervise(const std::vector<Replica>& replicas, const SupervisorOptions& options, std::FILE* out) {
  if (replicas.empty()) throw Error(options.name + ": no processes to start");
  return Supervisor(replicas, options, out).run();
}

}  // namespace meshtrain
