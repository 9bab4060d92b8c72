#include "meshtrain/cluster/supervisor_summary.hpp"

#include <algorithm>

#include "meshtrain/core/error.hpp"

namespace meshtrain {

void SupervisorSummary::record_failure(ReplicaProcess& c, const std::string& what) {
  drain_output(c, forwarder_);  // its last words are still in the pipe
  auto it = std::find_if(failures_.begin(), failures_.end(),
                         [&](const ReplicaFailures& f) { return f.label == c.replica->label; });
  if (it == failures_.end()) {
    failures_.emplace_back();
    it = failures_.end() - 1;
    it->label = c.replica->label;
  }
  ++it->count;
  it->last = what;
  it->last_lines = forwarder_.recent_lines(c.replica->label);
}

void SupervisorSummary::report_preempted(const std::string& why, SupervisorResult& result) {
  // A scheduler tells this status from a failure and requeues the job.
  result.exit_code = kExitPreempted;
  result.failure = why;
  forwarder_.line(options_.name, "preempted: every worker wrote a checkpoint of its last step; the job resumes "
                                 "from it when started again (exit status " +
                                     std::to_string(kExitPreempted) + ")");
}

bool SupervisorSummary::report_missing_checkpoint(const std::vector<ReplicaProcess>& processes,
                                                  SupervisorResult& result) {
  for (const auto& c : processes)
    if (c.replica->kind == ReplicaKind::Worker && !exited_with(c.status, kExitPreempted) &&
        !exited_with(c.status, 0)) {
      result.exit_code = exit_code_of(c.status);
      result.failure = "preempted, but " + describe(c.replica->label, c.status) + " before its checkpoint was written";
      forwarder_.line(options_.name, result.failure + "; the job resumes from its newest complete checkpoint");
      return true;
    }
  return false;
}

void SupervisorSummary::report_failure(const Failure& f, const std::string& culprit, SupervisorResult& result) {
  result.exit_code = f.code;
  result.failed = f.index;
  result.failure = f.what;
  if (result.failures.empty()) return;
  std::vector<std::string> lines;
  std::string head = "the job failed: " + f.what;
  if (options_.max_restarts > 0)
    head += " (after " + std::to_string(result.restarts) + " of " + std::to_string(options_.max_restarts) +
            " restarts of the whole job)";
  result.culprit = culprit;
  if (!culprit.empty()) lines.push_back(culprit);  // first: who the others waited for
  lines.push_back(head);
  for (const auto& r : result.failures) {
    lines.push_back("  " + r.label + " failed " + std::to_string(r.count) + (r.count == 1 ? " time" : " times") +
                    "; last: " + r.last + (r.last_lines.empty() ? "; no output" : "; its last lines:"));
    for (const auto& l : r.last_lines) lines.push_back("    | " + l);
  }
  for (const auto& l : lines) {
    forwarder_.line(options_.name, l);
    result.summary += l + "\n";
  }
}

}  // namespace meshtrain
