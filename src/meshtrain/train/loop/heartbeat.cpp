#include "meshtrain/train/loop/heartbeat.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace meshtrain {
namespace {

std::string path_from_environment() {
  const char* p = std::getenv("MESHTRAIN_HEARTBEAT_FILE");
  return p ? p : "";
}

}  // namespace

Heartbeat::Heartbeat() : Heartbeat(path_from_environment()) {}

Heartbeat::Heartbeat(std::string path) : path_(std::move(path)) {}

Heartbeat::~Heartbeat() {
  if (fd_ >= 0) close(fd_);
}

void Heartbeat::beat() {
  if (path_.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  // Once a second is plenty against timeouts of seconds, and keeps the cost
  // of a step's beat to a clock read.
  if (fd_ >= 0 && now - last_ < std::chrono::seconds(1)) return;
  if (fd_ < 0) fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0 || futimens(fd_, nullptr) != 0) {
    // Say why once and stop trying: the supervisor will see a hung worker and
    // name it, which is the right outcome for a heartbeat that cannot be sent.
    std::fprintf(stderr, "heartbeat: warning: cannot touch %s: %s; no more heartbeats\n", path_.c_str(), std::strerror(errno));
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
    path_.clear();
    return;
  }
  last_ = now;
}

}  // namespace meshtrain
