#include "meshtrain/cluster/local_launcher.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>

#include "meshtrain/core/error.hpp"

namespace meshtrain {
namespace {

using Clock = std::chrono::steady_clock;

// One child rank: its pid, the read ends of its output pipes, and the
// partial line of each stream not yet forwarded.
struct Child {
  int rank = 0;
  pid_t pid = -1;
  int fds[2] = {-1, -1};  // stdout, stderr
  std::string pending[2];
  bool exited = false;
  int status = 0;
};

std::string describe(int rank, int status) {
  if (WIFEXITED(status)) return "rank " + std::to_string(rank) + " exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "rank " + std::to_string(rank) + " killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "rank " + std::to_string(rank) + " ended with status " + std::to_string(status);
}

bool failed(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }

// Forwards complete lines from `data`, keeping a partial one for later.
void forward(Child& c, int stream, const char* data, size_t n, std::FILE* out, bool flush_partial) {
  c.pending[stream].append(data, n);
  std::string& buf = c.pending[stream];
  size_t start = 0, nl;
  while ((nl = buf.find('\n', start)) != std::string::npos) {
    std::fprintf(out, "[rank %d] %.*s\n", c.rank, static_cast<int>(nl - start), buf.data() + start);
    start = nl + 1;
  }
  buf.erase(0, start);
  if (flush_partial && !buf.empty()) {
    std::fprintf(out, "[rank %d] %s\n", c.rank, buf.c_str());
    buf.clear();
  }
  std::fflush(out);
}

pid_t spawn(const LaunchOptions& o, int rank, const std::string& job_id, const std::string& token, int port,
            int out_fd, int err_fd) {
  const int world = o.nproc + o.reducers;
  std::vector<std::string> env_kv = {
      "RANK=" + std::to_string(rank),        "WORLD_SIZE=" + std::to_string(world),
      "LOCAL_RANK=" + std::to_string(rank),  "LOCAL_WORLD_SIZE=" + std::to_string(world),
      "MESHTRAIN_NUM_REDUCERS=" + std::to_string(o.reducers),
      "MASTER_ADDR=" + o.master_addr,        "MASTER_PORT=" + std::to_string(port),
      "MESHTRAIN_JOB_ID=" + job_id,          "MESHTRAIN_JOB_TOKEN=" + token};
  std::vector<char*> argv;
  for (const auto& a : rank < o.nproc ? o.command : o.reducer_command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) throw Error(std::string("launch: fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    for (const auto& kv : env_kv) putenv(const_cast<char*>(kv.c_str()));
    // The launcher's own process group gets Ctrl-C; ranks follow through us.
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "launch: cannot run '%s': %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  return pid;
}

}  // namespace

int pick_free_port(const std::string& addr) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error(std::string("launch: socket: ") + std::strerror(errno));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = 0;
  if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) {
    close(fd);
    throw Error("launch: '" + addr + "' is not an IPv4 address");
  }
  socklen_t len = sizeof sa;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    int e = errno;
    close(fd);
    throw Error("launch: cannot find a free port on " + addr + ": " + std::strerror(e));
  }
  close(fd);
  return ntohs(sa.sin_port);
}

std::string random_token() {
  unsigned char bytes[16];
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  if (!urandom.read(reinterpret_cast<char*>(bytes), sizeof bytes)) throw Error("launch: cannot read /dev/urandom");
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned char b : bytes) {
    s += hex[b >> 4];
    s += hex[b & 15];
  }
  return s;
}

LaunchResult launch_local(const LaunchOptions& o, std::FILE* out) {
  if (o.nproc < 1) throw Error("launch: --nproc must be at least 1, got " + std::to_string(o.nproc));
  if (o.command.empty()) throw Error("launch: no command given (usage: meshtrain launch --nproc N -- COMMAND...)");
  if (o.reducers < 0) throw Error("launch: --reducers must not be negative, got " + std::to_string(o.reducers));
  if (o.reducers > 0 && o.reducer_command.empty()) throw Error("launch: reducers need a reducer command");
  const int port = o.master_port > 0 ? o.master_port : pick_free_port(o.master_addr);
  const std::string token = random_token();
  const std::string job_id = "job-" + std::to_string(getpid()) + "-" + token.substr(0, 8);

  const int world = o.nproc + o.reducers;
  std::vector<Child> children(world);
  for (int r = 0; r < world; ++r) {
    int out_pipe[2], err_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0)
      throw Error(std::string("launch: pipe failed: ") + std::strerror(errno));
    children[r].rank = r;
    children[r].pid = spawn(o, r, job_id, token, port, out_pipe[1], err_pipe[1]);
    close(out_pipe[1]);
    close(err_pipe[1]);
    children[r].fds[0] = out_pipe[0];
    children[r].fds[1] = err_pipe[0];
  }

  LaunchResult result;
  std::optional<Clock::time_point> kill_at;  // set once we start stopping the others
  int running = world;
  char buf[65536];
  while (running > 0) {
    std::vector<pollfd> pfds;
    std::vector<std::pair<int, int>> owner;  // (child, stream) per pollfd
    for (int r = 0; r < world; ++r)
      for (int s = 0; s < 2; ++s)
        if (children[r].fds[s] >= 0) {
          pfds.push_back({children[r].fds[s], POLLIN, 0});
          owner.push_back({r, s});
        }
    poll(pfds.data(), pfds.size(), 100);
    for (size_t i = 0; i < pfds.size(); ++i) {
      if (!(pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto [r, s] = owner[i];
      ssize_t n = read(pfds[i].fd, buf, sizeof buf);
      if (n > 0) {
        forward(children[r], s, buf, static_cast<size_t>(n), out, false);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        forward(children[r], s, "", 0, out, true);
        close(children[r].fds[s]);
        children[r].fds[s] = -1;
      }
    }
    for (auto& c : children) {
      if (c.exited) continue;
      int status = 0;
      if (waitpid(c.pid, &status, WNOHANG) == c.pid) {
        c.exited = true;
        c.status = status;
        --running;
        if (failed(status) && result.failed_rank < 0) {
          result.failed_rank = c.rank;
          result.failure = describe(c.rank, status);
          result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          std::fprintf(out, "[launch] %s; stopping the other ranks\n", result.failure.c_str());
          for (auto& other : children)
            if (!other.exited) kill(other.pid, SIGTERM);
          kill_at = Clock::now() + o.grace;
        }
      }
    }
    if (kill_at && Clock::now() > *kill_at) {
      for (auto& c : children)
        if (!c.exited) kill(c.pid, SIGKILL);
      kill_at.reset();
    }
  }
  for (auto& c : children)
    for (int s = 0; s < 2; ++s)
      if (c.fds[s] >= 0) {
        ssize_t n;
        while ((n = read(c.fds[s], buf, sizeof buf)) > 0) forward(c, s, buf, static_cast<size_t>(n), out, false);
        forward(c, s, "", 0, out, true);
        close(c.fds[s]);
      }
  return result;
}

}  // namespace meshtrain
