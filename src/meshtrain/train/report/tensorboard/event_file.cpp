#include "meshtrain/train/report/tensorboard/event_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
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
constexpr std::string_view kPrefix = "events.out.tfevents.";

checkpoint::Fd create_event_file(const fs::path& dir, std::string_view suffix, int64_t name_time) {
  const std::string stem =
      std::string(kPrefix) + std::to_string(name_time) + "." + host_name() + "." + std::to_string(::getpid()) + ".";
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

int64_t newest_name_time(const fs::path& dir, bool (*keep)(const fs::path&)) {
  int64_t newest = -1;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(kPrefix) || !keep(entry.path())) continue;
    const std::string time = name.substr(kPrefix.size(), name.find('.', kPrefix.size()) - kPrefix.size());
    if (!time.empty() && time.find_first_not_of("0123456789") == std::string::npos && time.size() < 19)
      newest = std::max(newest, static_cast<int64_t>(std::stoll(time)));
  }
  return newest;
}

EventFileWriter::EventFileWriter(const fs::path& dir, std::string_view suffix, int64_t name_time_after) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError("metrics.tensorboard: cannot create directory '" + dir.string() + "': " + ec.message());
  const double now = wall_time_now();
  fd_ = create_event_file(dir, suffix, std::max(static_cast<int64_t>(now), name_time_after + 1));
  write_event(encode_file_version_event(now));
}

void EventFileWriter::write_event(std::string_view event) {
  const std::string record = frame_record(event);
  fd_.write_all(record.data(), record.size());
}

}  // namespace meshtrain::tensorboard
