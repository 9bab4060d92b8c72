#pragma once
// The workers of a synchronous data-parallel job as one process sees them:
// its rank among the workers, and the process group their gradients travel
// over. Built from the launch environment (comm/bootstrap/launch_env.hpp)
// and the config's [parallel] section; a job with parallel.data = "none",
// or a single worker, gets rank 0 of 1 and no communication at all.
#include <memory>

#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/train/job_config.hpp"

namespace meshtrain {

class WorkerGroup {
 public:
  // Connects to the other workers (and the reducers, when the all-reduce is
  // reduction_server). Throws ConfigError for an environment that does not
  // fit the config, CommError when peers do not show up within
  // parallel.timeout_s.
  explicit WorkerGroup(const JobConfig& config);
  // Lets the reducers go (when there are any) and closes the connections.
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Processes of this job on this host (workers, and reducers when present).
  int local_size() const { return local_size_; }
  bool is_lead() const { return rank_ == 0; }
  // Null when there is one worker.
  comm::ProcessGroup* group() { return group_.get(); }
  comm::AllReduceAlgorithm algorithm() const { return algorithm_; }
  const char* transport_name() const;

  // Sums `values` over the workers, in place (a no-op for one worker).
  void sum(std::span<double> values);
  // Every worker gets the lead's value.
  int64_t broadcast_from_lead(int64_t value);

 private:
  int rank_ = 0, size_ = 1, local_size_ = 1;
  comm::AllReduceAlgorithm algorithm_ = comm::AllReduceAlgorithm::Auto;
  std::shared_ptr<comm::Communicator> communicator_;
  std::unique_ptr<comm::ProcessGroup> group_;
};

}  // namespace meshtrain
