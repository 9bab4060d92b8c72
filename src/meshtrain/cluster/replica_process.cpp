#include "meshtrain/cluster/replica_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "meshtrain/core/error.hpp"

extern char** environ;

namespace meshtrain {
namespace {

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

}  // namespace

void spawn_replica(ReplicaProcess& c, const std::vector<std::string>& own_env, bool terminal) {
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
  c.started = std::chrono::steady_clock::now();
}

void pump_output(std::vector<ReplicaProcess>& processes, OutputForwarder& forwarder, int timeout_ms) {
  std::vector<pollfd> pfds;
  std::vector<std::pair<size_t, int>> owner;  // (process, stream) per pollfd
  for (size_t i = 0; i < processes.size(); ++i)
    for (int s = 0; s < 2; ++s)
      if (processes[i].fds[s] >= 0) {
        pfds.push_back({processes[i].fds[s], POLLIN, 0});
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
    ReplicaProcess& c = processes[i];
    ssize_t n = read(pfds[k].fd, buf, sizeof buf);
    if (n > 0) {
      forwarder.feed(c.replica->label, c.pending[s], {buf, static_cast<size_t>(n)});
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      forwarder.flush(c.replica->label, c.pending[s]);
      close(c.fds[s]);
      c.fds[s] = -1;
    }
  }
}

void drain_output(ReplicaProcess& c, OutputForwarder& forwarder) {
  char buf[65536];
  for (int s = 0; s < 2; ++s) {
    if (c.fds[s] < 0) continue;
    fcntl(c.fds[s], F_SETFL, fcntl(c.fds[s], F_GETFL) | O_NONBLOCK);
    ssize_t n;
    while ((n = read(c.fds[s], buf, sizeof buf)) > 0)
      forwarder.feed(c.replica->label, c.pending[s], {buf, static_cast<size_t>(n)});
    forwarder.flush(c.replica->label, c.pending[s]);
    close(c.fds[s]);
    c.fds[s] = -1;
  }
}

bool exited_with(int status, int code) { return WIFEXITED(status) && WEXITSTATUS(status) == code; }

bool failed(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }
int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

std::string describe(const std::string& label, int status) {
  if (WIFEXITED(status)) return label + " exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return label + " killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return label + " ended with status " + std::to_string(status);
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g s", s);
  return buf;
}

}  // namespace meshtrain
