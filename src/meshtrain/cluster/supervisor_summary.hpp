#pragma once
// The job's outcome as the supervisor (replica_supervisor.hpp) reports it:
// each replica's failures over the whole job, and at the end the exit code
// and the summary of why it failed or that it was preempted.
#include <string>
#include <vector>

#include "meshtrain/cluster/output_forwarder.hpp"
#include "meshtrain/cluster/replica_process.hpp"
#include "meshtrain/cluster/replica_supervisor.hpp"

namespace meshtrain {

// A failure that decides the job's outcome.
struct Failure {
  int index = -1;
  std::string what;
  int code = 0;
  bool retryable = true;  // false: bad configuration or input (kExitBadInput), or diverged (kExitDiverged)
};

class SupervisorSummary {
 public:
  SupervisorSummary(const SupervisorOptions& options, OutputForwarder& forwarder)
      : options_(options), forwarder_(forwarder) {}

  // Counts a failure of c and keeps its last lines for the summary.
  void record_failure(ReplicaProcess& c, const std::string& what);
  const std::vector<ReplicaFailures>& failures() const { return failures_; }

  // Preempted: every worker saved the step it was in (`why`: the signal to
  // us, or "preempted").
  void report_preempted(const std::string& why, SupervisorResult& result);
  // Preempted, but a worker ended otherwise: its checkpoint is missing.
  // False when every worker checkpointed.
  bool report_missing_checkpoint(const std::vector<ReplicaProcess>& processes, SupervisorResult& result);
  // The failure that ended the job, and the summary of every failure
  // (headed by the hang's `culprit`, if any), into `result`.
  void report_failure(const Failure& f, const std::string& culprit, SupervisorResult& result);

 private:
  const SupervisorOptions& options_;
  OutputForwarder& forwarder_;
  std::vector<ReplicaFailures> failures_;  // in the order of each replica's first failure
};

}  // namespace meshtrain
