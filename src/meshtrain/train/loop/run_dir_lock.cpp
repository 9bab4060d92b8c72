#include "meshtrain/train/loop/run_dir_lock.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace meshtrain {
namespace {

namespace fs = std::filesystem;

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// This process's command line on one line, shortened.
std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!raw.empty() && raw.back() == '\0') raw.pop_back();
  for (char& c : raw)
    if (c == '\0' || c == '\n' || c == '\r') c = ' ';
  constexpr size_t kMax = 300;
  if (raw.size() > kMax) raw = raw.substr(0, kMax) + "...";
  return raw;
}

std::string record_text() {
  std::ostringstream s;
  s << "# meshtrain: one job per run directory. The job below holds this file locked (flock) while it runs;\n"
       "# the lock dies with it. Deleting this file lets another job take the directory over.\n"
    << "host=" << host_name() << "\n"
    << "pid=" << ::getpid() << "\n"
    << "parent_pid=" << ::getppid() << "\n"
    << "since=" << utc_now() << "\n"
    << "command=" << command_line() << "\n";
  return s.str();
}

std::optional<RunDirHolder> parse_holder(const std::string& text) {
  RunDirHolder h;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (line.starts_with('#') || eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    try {
      if (key == "host") h.host = value;
      if (key == "pid") h.pid = std::stol(value);
      if (key == "parent_pid") h.parent_pid = std::stol(value);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    if (key == "since") h.since = value;
    if (key == "command") h.command = value;
  }
  // The holder writes its record after it locks; until the last line is
  // there the record is incomplete.
  if (h.host.empty() || h.pid <= 0 || h.since.empty() || text.find("\ncommand=") == std::string::npos)
    return std::nullopt;
  return h;
}

std::string read_all(int fd) {
  std::string text;
  char buffer[4096];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buffer, sizeof buffer, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
    at += n;
  }
  return text;
}

// The holder of the lock on `fd`'s file: it writes its record just after it
// locks, so an empty or partial record gets a moment to complete.
std::optional<RunDirHolder> holder_of(int fd) {
  for (int attempt = 0;; ++attempt) {
    std::optional<RunDirHolder> holder = parse_holder(read_all(fd));
    if (holder || attempt == 20) return holder;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string busy_message(const std::string& dir, const std::string& path, int fd) {
  const std::optional<RunDirHolder> h = holder_of(fd);
  if (!h)
    return "training.out_dir '" + dir + "' is in use by another job: a process holds " + path +
           " locked but records no holder in it. One job per run directory: wait for that job to end, stop it, or "
           "choose another training.out_dir; `fuser -v " + path + "` names the holder on its host, and deleting " +
           path + " takes the directory over";
  const std::string pid = std::to_string(h->pid);
  std::string message = "training.out_dir '" + dir + "' is in use by another job: pid " + pid + " on host " +
                        h->host + " (parent pid " + std::to_string(h->parent_pid) + ") has held " + path +
                        " since " + h->since + (h->command.empty() ? "" : " (" + h->command + ")");
  // On this host, a holder that is gone means that a process it started
  // keeps the file open (a descriptor inherited without exec).
  if (h->host == host_name() && ::kill(static_cast<pid_t>(h->pid), 0) != 0 && errno == ESRCH)
    message += "; pid " + pid + " is no longer running, but a process it started holds the lock (`fuser -v " +
               path + "` names it)";
  return message + ". One job per run directory: wait for that job to end, stop it (under `meshtrain run` or a "
                   "scheduler, the whole job: a worker killed alone is restarted), or choose another "
                   "training.out_dir. If pid " + pid + " is hung, kill it; if host " + h->host +
                   " is gone, delete " + path + " to take the directory over";
}

}  // namespace

RunDirLock::RunDirLock(const std::string& dir) : path_((fs::path(dir) / kFileName).string()) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw IoError("training.out_dir: cannot create directory '" + dir + "'" + (ec ? ": " + ec.message() : ""));
  for (int attempt = 0;; ++attempt) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) throw IoError(path_ + ": cannot open the run directory's lock file: " + std::strerror(errno));
    int rc;
    do rc = ::flock(fd, LOCK_EX | LOCK_NB);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      const int err = errno;
      if (err == EWOULDBLOCK) {
        const std::string message = busy_message(dir, path_, fd);
        ::close(fd);
        throw RunDirBusyError(message);
      }
      ::close(fd);
      std::fprintf(stderr,
                   "meshtrain: warning: cannot lock %s (%s): this file system has no locks; running without the "
                   "check that no other job uses training.out_dir\n",
                   path_.c_str(), std::strerror(err));
      return;
    }
    // Between open and flock the file may have been deleted (a takeover)
    // or deleted and created again: a lock on a file no longer in the
    // directory keeps no one out. Lock the one that is there.
    struct stat locked {}, named {};
    if (::fstat(fd, &locked) == 0 && ::stat(path_.c_str(), &named) == 0 && locked.st_dev == named.st_dev &&
        locked.st_ino == named.st_ino) {
      fd_ = fd;
      break;
    }
    ::close(fd);
    if (attempt == 100) throw IoError(path_ + ": the lock file keeps being replaced; is another job taking it over?");
  }
  const std::string text = record_text();
  bool written = ::ftruncate(fd_, 0) == 0;
  for (size_t at = 0; written && at < text.size();) {
    const ssize_t n = ::pwrite(fd_, text.data() + at, text.size() - at, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    written = n > 0;
    if (written) at += static_cast<size_t>(n);
  }
  // Synced: a reader on another host of a network file system sees it.
  if (!written || ::fsync(fd_) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
    throw IoError(path_ + ": cannot write the run directory's lock file: " + why);
  }
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

RunDirLock::RunDirLock(RunDirLock&& other) noexcept : path_(std::move(other.path_)), fd_(other.fd_) {
  other.fd_ = -1;
}

std::optional<RunDirHolder> read_run_dir_holder(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<RunDirHolder> holder = parse_holder(read_all(fd));
  ::close(fd);
  return holder;
}

}  // namespace meshtrain
