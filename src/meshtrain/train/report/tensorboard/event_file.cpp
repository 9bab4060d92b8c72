#include "meshtrain/train/report/tensorboard/event_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>

#include "meshtrain/core/error.hpp"
#include "meshtrain/train/report/tensorboard/event_proto.hpp"
#include "meshtrain/train/report/tensorboard/tfrecord.hpp"

namespace meshtrain::tensorboard {
namespace {

namespace fs = std::filesystem;

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// A new file of this process in dir, created exclusively.
checkpoint::Fd create_event_file(const fs::path& dir, std::string_view suffix, double wall_time) {
  const std::string stem = "events.out.tfevents." + std::to_string(static_cast<int64_t>(wall_time)) + "." +
                           host_name() + "." + std::to_string(::getpid()) + ".";
  for (int n = 0;; ++n) {
    const fs::path path = dir / (stem + std::to_string(n) + std::string(suffix));
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) return checkpoint::Fd(fd, path);
    if (errno != EEXIST) throw IoError("metrics.tensorboard: " + checkpoint::errno_text("create", path));
  }
}

}  // namespace

double wall_time_now() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return std::chrono::duration<double>(now).count();
}

EventFileWriter::EventFileWriter(const fs::path& dir, std::string_view suffix) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError("metrics.tensorboard: cannot create directory '" + dir.string() + "': " + ec.message());
  const double now = wall_time_now();
  fd_ = create_event_file(dir, suffix, now);
  write_event(encode_file_version_event(now));
}

void EventFileWriter::write_event(std::string_view event) {
  const std::string record = frame_record(event);
  fd_.write_all(record.data(), record.size());
}

}  // namespace meshtrain::tensorboard
