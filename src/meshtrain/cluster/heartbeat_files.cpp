#include "meshtrain/cluster/heartbeat_files.hpp"

#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "meshtrain/cluster/replica_process.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain {

HeartbeatDir::HeartbeatDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/meshtrain-heartbeats.XXXXXX";
  if (!mkdtemp(tmpl.data())) throw Error("cannot create a directory for heartbeats: " + tmpl + ": " + std::strerror(errno));
  path_ = tmpl;
}

HeartbeatDir::~HeartbeatDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string HeartbeatDir::file_for(std::string label) const {
  for (char& ch : label)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '-';
  return path_ + "/" + label + ".hb";
}

std::string overdue_heartbeat(const std::string& file, std::chrono::steady_clock::time_point started,
                              std::chrono::milliseconds timeout, std::chrono::milliseconds first) {
  struct stat st {};
  if (stat(file.c_str(), &st) == 0) {
    // mtime is wall-clock time; the file system stamps it from the same clock.
    const auto last = std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
        std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
    const auto quiet = std::chrono::system_clock::now() - last;
    if (quiet > timeout)
      return "sent no heartbeat for " + seconds_text(std::chrono::duration<double>(quiet).count()) +
             " (parallel.heartbeat_timeout_s " + seconds_text(timeout.count() / 1000.0) + ")";
    return "";
  }
  if (std::chrono::steady_clock::now() - started > first)
    return "sent no first heartbeat within " + seconds_text(first.count() / 1000.0) + " of its start";
  return "";
}

}  // namespace meshtrain
