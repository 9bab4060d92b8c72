#include "meshtrain/checkpoint/checkpoint_dir.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <set>
#include <string_view>
#include <system_error>

#include "meshtrain/checkpoint/durable_io.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::checkpoint {

namespace fs = std::filesystem;

namespace {

// Transient directories (tmp: being written; old: an existing checkpoint set
// aside while being replaced; del: being deleted) carry their owner's pid.
// Those owned by this process are registered here, so that a leftover from an
// earlier process that had our pid (common in containers, where pid 1
// restarts) can be told from one we are using right now.
std::mutex active_mutex;
std::set<fs::path> active_paths;

void activate(const fs::path& p) {
  std::lock_guard lock(active_mutex);
  active_paths.insert(p);
}
void deactivate(const fs::path& p) {
  std::lock_guard lock(active_mutex);
  active_paths.erase(p);
}
bool active(const fs::path& p) {
  std::lock_guard lock(active_mutex);
  return active_paths.count(p) > 0;
}

fs::path transient_path(const fs::path& dir, int64_t step, std::string_view kind, int64_t pid = ::getpid()) {
  return dir / ("." + step_dir_name(step) + "." + std::string(kind) + "-" + std::to_string(pid));
}

// Takes `prefix` off the front of `s`; false (s unchanged) when it is not there.
bool take_prefix(std::string_view& s, std::string_view prefix) {
  if (!s.starts_with(prefix)) return false;
  s.remove_prefix(prefix.size());
  return true;
}

// Takes a run of min_digits to max_digits decimal digits off the front of
// `s` and returns its value, or -1 (s unchanged) when there is no such run.
int64_t take_number(std::string_view& s, size_t min_digits, size_t max_digits) {
  size_t n = 0;
  while (n < s.size() && s[n] >= '0' && s[n] <= '9') ++n;
  if (n < min_digits || n > max_digits) return -1;
  int64_t value = 0;
  for (size_t i = 0; i < n; ++i) value = value * 10 + (s[i] - '0');
  s.remove_prefix(n);
  return value;
}

// The step of a canonical final name ("step_00000100"), or -1.
int64_t parse_step_name(const std::string& name) {
  std::string_view rest = name;
  if (!take_prefix(rest, "step_")) return -1;
  const int64_t step = take_number(rest, 8, 18);
  if (step < 0 || !rest.empty()) return -1;
  return step_dir_name(step) == name ? step : -1;  // "step_000000100" is not ours
}

// The owner's pid of a transient name (".step_00000100.tmp-1234", kinds tmp,
// old and del: transient_path), or -1.
int64_t parse_transient_owner(std::string_view name) {
  if (!take_prefix(name, ".step_") || take_number(name, 8, 18) < 0 || !take_prefix(name, ".")) return -1;
  if (!take_prefix(name, "tmp-") && !take_prefix(name, "old-") && !take_prefix(name, "del-")) return -1;
  const int64_t pid = take_number(name, 1, 9);
  return name.empty() ? pid : -1;
}

bool writer_alive(pid_t pid, const fs::path& path) {
  if (pid == ::getpid()) return active(path);
  return ::kill(pid, 0) == 0 || errno == EPERM;  // EPERM: alive, another user's
}

void remove_tree(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  if (ec) throw IoError("remove " + p.string() + ": " + ec.message());
}

void rename_or_throw(const fs::path& from, const fs::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) throw IoError(errno_text("rename " + from.string() + " to", to));
}

}  // namespace

std::string step_dir_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step_%08lld", static_cast<long long>(step));
  return buf;
}

CheckpointWriter::CheckpointWriter(fs::path dir, int64_t step, fs::path tmp)
    : dir_(std::move(dir)), step_(step), tmp_(std::move(tmp)) {}

CheckpointWriter::CheckpointWriter(CheckpointWriter&& other) noexcept
    : dir_(std::move(other.dir_)), step_(other.step_), tmp_(std::move(other.tmp_)) {
  other.tmp_.clear();
}

CheckpointWriter::~CheckpointWriter() {
  if (tmp_.empty()) return;
  std::error_code ec;
  fs::remove_all(tmp_, ec);  // best effort; prune() removes it later otherwise
  deactivate(tmp_);
}

void CheckpointWriter::abandon_in_place() {
  deactivate(tmp_);
  tmp_.clear();
}

fs::path CheckpointWriter::tmp_path_for(const fs::path& dir, int64_t step, int64_t writer_pid) {
  return transient_path(dir, step, "tmp", writer_pid);
}

CheckpointWriter CheckpointWriter::begin(const fs::path& dir, int64_t step) {
  if (step < 0) throw CheckpointError("checkpoint step must be >= 0, got " + std::to_string(step));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw IoError("checkpoint directory " + dir.string() + " cannot be created: " +
                  (ec ? ec.message() : "exists and is not a directory"));
  fs::path tmp = transient_path(dir, step, "tmp");
  if (active(tmp)) throw CheckpointError("checkpoint step " + std::to_string(step) + " in " + dir.string() +
                                         " is already being written by this process");
  if (::mkdir(tmp.c_str(), 0755) != 0) {
    if (errno != EEXIST) throw IoError(errno_text("create checkpoint directory", tmp));
    // Not registered, so left by an earlier process that had our pid.
    remove_tree(tmp);
    if (::mkdir(tmp.c_str(), 0755) != 0) throw IoError(errno_text("create checkpoint directory", tmp));
  }
  activate(tmp);
  return CheckpointWriter(dir, step, std::move(tmp));
}

CheckpointInfo CheckpointWriter::commit(const ManifestJob& job) {
  if (tmp_.empty()) throw CheckpointError("CheckpointWriter::commit() on a committed or moved-from writer");
  write_manifest(tmp_, step_, job);
  const fs::path final_path = dir_ / step_dir_name(step_);

  if (::rename(tmp_.c_str(), final_path.c_str()) != 0) {
    if (errno != ENOTEMPTY && errno != EEXIST) throw IoError(errno_text("rename " + tmp_.string() + " to", final_path));
    // A checkpoint for this step exists. Swap the two atomically: the final
    // name points at the old one or the new one, never at nothing.
    if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, final_path.c_str(), RENAME_EXCHANGE) == 0) {
      fsync_dir(dir_);  // the swap is durable before the old one goes
      std::error_code ec;
      fs::remove_all(tmp_, ec);  // tmp_ now holds the old checkpoint
    } else if (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) {
      // No exchange on this filesystem: set the old one aside, move the new
      // one in, then delete the old. A crash in between leaves both complete
      // copies under hidden names rather than destroying either.
      const fs::path aside = transient_path(dir_, step_, "old");
      activate(aside);
      remove_tree(aside);
      rename_or_throw(final_path, aside);
      rename_or_throw(tmp_, final_path);
      fsync_dir(dir_);
      std::error_code ec;
      fs::remove_all(aside, ec);
      deactivate(aside);
    } else {
      throw IoError(errno_text("exchange " + tmp_.string() + " with", final_path));
    }
  }
  fsync_dir(dir_);
  deactivate(tmp_);
  tmp_.clear();
  return {step_, final_path};
}

std::vector<CheckpointInfo> list_complete(const fs::path& dir, std::vector<std::string>* skipped) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    if (ec) throw IoError("checkpoint directory " + dir.string() + ": " + ec.message());
    return {};
  }
  std::vector<CheckpointInfo> found;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const int64_t step = parse_step_name(it->path().filename().string());
    if (step < 0) continue;
    try {
      if (!it->is_directory()) throw CheckpointError(it->path().string() + " is not a directory");
      Manifest m = read_manifest(it->path());
      if (m.step != step)
        throw CheckpointError("checkpoint " + it->path().string() + ": manifest says step " + std::to_string(m.step));
      check_manifest_sizes(it->path(), m);
      found.push_back({step, it->path()});
    } catch (const Error& e) {
      if (skipped) skipped->push_back(e.what());
    }
  }
  if (ec) throw IoError("list checkpoint directory " + dir.string() + ": " + ec.message());
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return found;
}

std::optional<CheckpointInfo> latest_complete(const fs::path& dir) {
  auto all = list_complete(dir);
  if (all.empty()) return std::nullopt;
  return all.back();
}

Manifest verify_checkpoint(const fs::path& step_dir) {
  const int64_t step = parse_step_name(step_dir.filename().string());
  if (step < 0) throw CheckpointError(step_dir.string() + " is not named like a complete checkpoint (step_<8 digits>)");
  Manifest m = read_manifest(step_dir);
  if (m.step != step)
    throw CheckpointError("checkpoint " + step_dir.string() + ": manifest says step " + std::to_string(m.step));
  check_manifest_checksums(step_dir, m);
  return m;
}

std::optional<CheckpointInfo> latest_verified(const fs::path& dir, std::vector<std::string>* skipped) {
  auto all = list_complete(dir, skipped);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      verify_checkpoint(it->path);
      return *it;
    } catch (const Error& e) {
      if (skipped) skipped->push_back(e.what());
    }
  }
  return std::nullopt;
}

std::vector<fs::path> prune(const fs::path& dir, size_t keep) {
  keep = std::max<size_t>(keep, 1);
  std::vector<fs::path> removed;
  if (std::error_code missing; !fs::exists(dir, missing) && !missing) return removed;
  const auto complete = list_complete(dir);
  for (size_t i = 0; i + keep < complete.size(); ++i) {
    // Rename first so a half-deleted directory never carries a final name.
    const fs::path aside = transient_path(dir, complete[i].step, "del");
    activate(aside);
    remove_tree(aside);
    rename_or_throw(complete[i].path, aside);
    fsync_dir(dir);
    remove_tree(aside);
    deactivate(aside);
    removed.push_back(complete[i].path);
  }

  std::error_code ec;
  std::vector<fs::path> stale;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const int64_t owner = parse_transient_owner(it->path().filename().string());
    if (owner >= 0 && !writer_alive(static_cast<pid_t>(owner), it->path())) stale.push_back(it->path());
  }
  if (ec) throw IoError("list checkpoint directory " + dir.string() + ": " + ec.message());
  for (const auto& p : stale) {
    remove_tree(p);
    removed.push_back(p);
  }
  return removed;
}

}  // namespace meshtrain::checkpoint
