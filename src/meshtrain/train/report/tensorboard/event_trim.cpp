#include "meshtrain/train/report/tensorboard/event_trim.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "meshtrain/checkpoint/durable_io.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/train/report/tensorboard/event_file.hpp"
#include "meshtrain/train/report/tensorboard/event_proto.hpp"
#include "meshtrain/train/report/tensorboard/tfrecord.hpp"

namespace meshtrain::tensorboard {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kEventFilePrefix = "events.out.tfevents.";
constexpr std::string_view kTempPrefix = ".rewrite-";  // no "tfevents": TensorBoard skips it

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw IoError("metrics.tensorboard: cannot read '" + path.string() + "'");
  return bytes;
}

void replace_file(const fs::path& path, const std::string& bytes) {
  const fs::path tmp = path.parent_path() / (std::string(kTempPrefix) + std::to_string(::getpid()) + ".tmp");
  const int raw = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (raw < 0) throw IoError("metrics.tensorboard: " + checkpoint::errno_text("create", tmp));
  checkpoint::Fd fd(raw, tmp);
  fd.write_all(bytes.data(), bytes.size());
  fd.fsync();
  fd.close();
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw IoError("metrics.tensorboard: cannot replace '" + path.string() + "': " + ec.message());
}

// One file; returns the events it dropped, sets `changed` if it rewrote or removed it.
int64_t trim_file(const fs::path& path, int64_t from_step, bool& changed) {
  const std::string bytes = read_all(path);
  const RecordScan scan = scan_records(bytes);
  std::string kept;
  int64_t dropped = 0;
  bool summaries_left = false;
  for (std::string_view record : scan.records) {
    const auto head = decode_event_head(record);
    if (head && head->step > from_step) {
      ++dropped;
      continue;
    }
    summaries_left = summaries_left || !head || head->has_summary;
    kept += frame_record(record);
  }
  if (!summaries_left) {
    fs::remove(path);
    changed = true;
  } else if (dropped > 0 || scan.valid_bytes != bytes.size()) {
    replace_file(path, kept);
    changed = true;
  }
  return dropped;
}

}  // namespace

bool is_trainer_event_file(const fs::path& path) {
  const std::string name = path.filename().string();
  return name.starts_with(kEventFilePrefix) && !name.ends_with(kEvaluatorSuffix);
}

int64_t drop_events_after(const fs::path& dir, int64_t from_step) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return 0;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(kTempPrefix)) fs::remove(entry.path());  // of a rewrite a kill cut short
    else if (entry.is_regular_file() && is_trainer_event_file(entry.path())) files.push_back(entry.path());
  }
  int64_t dropped = 0;
  bool changed = false;
  for (const fs::path& file : files) dropped += trim_file(file, from_step, changed);
  if (changed) checkpoint::fsync_dir(dir);
  return dropped;
}

}  // namespace meshtrain::tensorboard
