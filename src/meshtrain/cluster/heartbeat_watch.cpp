#include "meshtrain/cluster/heartbeat_watch.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>

#include "meshtrain/comm/flight/hang_report.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain {
namespace {

// The RANK its environment gives a replica; -1 when none.
int rank_of(const Replica& r) {
  for (const auto& kv : r.env)
    if (kv.rfind("RANK=", 0) == 0) return std::atoi(kv.c_str() + 5);
  return -1;
}

}  // namespace

HeartbeatWatch::HeartbeatWatch(const SupervisorOptions& options, OutputForwarder& forwarder)
    : options_(options), forwarder_(forwarder) {
  if (options_.heartbeat_timeout.count() > 0) dir_.emplace();
}

void HeartbeatWatch::assign_files(std::vector<ReplicaProcess>& processes) const {
  if (!dir_) return;
  for (auto& c : processes)
    if (c.replica->kind == ReplicaKind::Worker) c.heartbeat_file = dir_->file_for(c.replica->label);
}

void HeartbeatWatch::new_group() {
  culprit_.clear();
  diagnosed_ = culprit_killed_ = false;
}

bool HeartbeatWatch::kill_hung(std::vector<ReplicaProcess>& processes) {
  if (!dir_) return false;
  const std::chrono::milliseconds timeout = options_.heartbeat_timeout;
  const std::chrono::milliseconds first = std::max(timeout, options_.heartbeat_startup);
  if (culprit_killed_) return false;  // the group goes down with its hang's culprit
  for (auto& c : processes) {
    if (c.heartbeat_file.empty() || c.exited || c.stopped || !c.hung.empty()) continue;
    const std::string why = overdue_heartbeat(c.heartbeat_file, c.started, timeout, first);
    if (why.empty()) continue;
    // The peers waiting for a hung worker stop beating too: the flight
    // recorder's rings tell which one the others wait for.
    const double min_wait = std::min(1.0, timeout.count() / 4000.0);
    if (kill_culprits(processes, diagnose_hang(min_wait), c.replica->label + " " + why)) return true;
    c.hung = why;
    kill(c.pid, SIGKILL);
  }
  return false;
}

std::vector<int> HeartbeatWatch::diagnose_hang(double min_wait_s) {
  if (options_.flight_dir.empty() || diagnosed_) return {};
  diagnosed_ = true;
  comm::flight::HangReport report;
  try {
    report = comm::flight::diagnose_run_dir(options_.flight_dir, min_wait_s);
  } catch (const Error&) {
    return {};  // no rings (yet): nothing to say
  }
  const comm::flight::Diagnosis& d = report.diagnosis;
  if (d.finding == comm::flight::Finding::NoHang) return {};
  culprit_ = (d.named() ? "hang " : "") + d.summary;  // "hang culprit: rank 1 ...", "hang: no single culprit: ..."
  forwarder_.line(options_.name, culprit_);
  for (const std::string& line : d.details) forwarder_.line(options_.name, "  " + line);
  size_t start = 0;
  for (size_t end; (end = report.table.find('\n', start)) != std::string::npos; start = end + 1)
    forwarder_.line(options_.name, "  " + report.table.substr(start, end - start));
  return d.culprits;
}

// Kills the running workers of these ranks as hung; false when none is
// running (then nothing was done).
bool HeartbeatWatch::kill_culprits(std::vector<ReplicaProcess>& processes, const std::vector<int>& ranks,
                                   const std::string& noticed) {
  bool killed = false;
  for (auto& c : processes) {
    if (c.exited || c.stopped || c.pid <= 0 || c.replica->kind != ReplicaKind::Worker) continue;
    const int rank = rank_of(*c.replica);
    if (rank < 0 || std::find(ranks.begin(), ranks.end(), rank) == ranks.end()) continue;
    c.hung = "is the hang's culprit (" + noticed + "; the flight recorder names rank " + std::to_string(rank) + ")";
    kill(c.pid, SIGKILL);
    siginfo_t info{};
    waitid(P_PID, id_t(c.pid), &info, WEXITED | WNOWAIT);  // dead, left for reap()
    killed = true;
  }
  culprit_killed_ = killed;
  return killed;
}

}  // namespace meshtrain
