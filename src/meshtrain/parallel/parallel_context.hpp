#pragma once
// The workers of a synchronous job as one process sees them: the device mesh
// they form (comm/mesh/device_mesh.hpp: pipeline x data x tensor ways, tensor
// fastest), this process's place in it, and the process groups cut from it:
// the data-parallel group its gradients are reduced over (and, under expert
// parallelism, the expert group its tokens travel in and the expert-data
// group its expert gradients are reduced over), the tensor-parallel
// group its layers exchange activations in, the pipeline group its stages
// pass micro-batches along (and the first and last stage's pair, which sums
// the tied embedding's gradient), and all the workers (for the lead's
// decisions: resume step, checkpoint directory). Built from the
// launch environment (comm/bootstrap/launch_env.hpp) and the config's
// [parallel] section; a job with parallel.data = "none", tensor = 1 and
// pipeline = 1, or a
// single worker, gets rank 0 of 1 and no communication at all.
#include <memory>
#include <span>
#include <vector>

#include "meshtrain/comm/bootstrap/launch_env.hpp"
#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/comm/mesh/device_mesh.hpp"
#include "meshtrain/nn/moe/expert_parallel.hpp"
#include "meshtrain/nn/tensor_parallel.hpp"
#include "meshtrain/train/config/job_config.hpp"
#include "meshtrain/train/config/rank_agreement.hpp"

namespace meshtrain {

class WorkerGroup {
 public:
  // Connects to the other workers (and the reducers, when the all-reduce is
  // reduction_server), then checks that they all run the job of `shared`
  // (rank_agreement.hpp). Throws ConfigError for an environment that does not
  // fit the config (a world that is not a multiple of parallel.tensor, ...),
  // CommError when peers do not show up within parallel.timeout_s.
  WorkerGroup(const ParallelSection& parallel, const SharedSettings& shared);
  // Lets the reducers go (when there are any) and closes the connections.
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  // Data-parallel rank and ways: which share of the global batch this
  // process reads, and what its gradients are averaged over. Tensor ranks
  // of one group share the same data rank (and batch).
  int rank() const { return mesh_.coord(worker_rank_).dp; }
  int size() const { return mesh_.size(comm::MeshAxis::Data); }
  // Tensor-parallel rank and ways.
  int tensor_rank() const { return mesh_.coord(worker_rank_).tp; }
  int tensor_size() const { return mesh_.size(comm::MeshAxis::Tensor); }
  // Pipeline stage (rank in the pipeline group) and stages.
  int pipeline_rank() const { return mesh_.coord(worker_rank_).pp; }
  int pipeline_size() const { return mesh_.size(comm::MeshAxis::Pipeline); }
  // Expert-parallel ways (inside the data ways) and this rank's place among
  // them.
  int expert_size() const { return mesh_.size(comm::MeshAxis::Expert); }
  int expert_rank() const { return mesh_.coord(worker_rank_).ep; }
  // The data ranks that hold this rank's experts: their rank among
  // themselves and how many (size() / expert_size()).
  int expert_data_rank() const { return rank() / expert_size(); }
  int expert_data_size() const { return size() / expert_size(); }
  // Position among all workers, and how many there are (data x tensor x pipeline).
  int worker_rank() const { return worker_rank_; }
  int workers() const { return mesh_.workers(); }
  const comm::DeviceMesh& mesh() const { return mesh_; }
  // Processes of this job on this host (workers, and reducers when present).
  int local_size() const { return local_size_; }
  bool is_lead() const { return worker_rank_ == 0; }
  // The data-parallel group; null when there is one data-parallel way.
  comm::ProcessGroup* group() { return size() > 1 ? data_group_.get() : nullptr; }
  // The tensor-parallel group as nn/'s layers take it; null for tensor = 1.
  // It has a communication channel of its own (comm/bootstrap/connect.hpp).
  nn::TensorParallelComm* tensor_group() { return tensor_comm_.get(); }
  // The expert group as nn/'s MoE layers take it (its all-to-alls on a
  // channel of its own); null for expert = 1.
  nn::ExpertParallelComm* expert_group() { return expert_comm_.get(); }
  // The data ranks holding this rank's experts; null when that is one rank.
  comm::ProcessGroup* expert_data_group() { return expert_data_size() > 1 ? expert_data_group_.get() : nullptr; }
  // The pipeline group, on a channel of its own; null for pipeline = 1.
  comm::ProcessGroup* pipeline_group() { return pipeline_group_.get(); }
  // The first and the last stage of this rank's pipeline (group ranks 0 and
  // 1), which hold the tied embedding; null elsewhere and for pipeline = 1.
  comm::ProcessGroup* embedding_group() { return embedding_group_.get(); }
  comm::AllReduceAlgorithm algorithm() const { return algorithm_; }
  const char* transport_name() const;
  // Bytes this process has sent in every group so far.
  uint64_t bytes_sent() const;

  // Sums `values` over the data-parallel ranks, in place (a no-op for one).
  void sum(std::span<double> values);
  // Sums `values` over the tensor-parallel ranks, in place (a no-op for one).
  void tensor_sum(std::span<double> values);
  // Sums `values` over the expert group (a no-op for expert = 1).
  void expert_sum(std::span<double> values);
  // Sums `values` over the pipeline stages, in place (a no-op for one).
  void pipeline_sum(std::span<double> values);
  // Every worker's `values` (of any length), in worker-rank order, on every
  // worker; a lone process gets its own.
  std::vector<std::vector<double>> all_gather_workers(std::span<const double> values);
  // Every worker gets the lead's value.
  int64_t broadcast_from_lead(int64_t value);
  // The largest of the workers' values, on every worker (one tiny
  // all-reduce over all of them; a lone process gets its own).
  int64_t max_over_workers(int64_t value);

 private:
  // The data group's share of the reducers (reduction_server/groups.hpp).
  void use_reducers(int reducers);
  // This process's place in the mesh of workers `env` describes.
  void place(const ParallelSection& p, const comm::LaunchEnv& env);
  // Its transports, the groups cut from the mesh, and the agreement check.
  void connect(const ParallelSection& p, comm::LaunchEnv& env, const SharedSettings& shared);

  int worker_rank_ = 0, local_size_ = 1;
  comm::DeviceMesh mesh_{comm::MeshShape{}, 1};
  comm::AllReduceAlgorithm algorithm_ = comm::AllReduceAlgorithm::Auto;
  std::shared_ptr<comm::Communicator> communicator_;         // all workers, the data axis
  std::shared_ptr<comm::Communicator> tensor_communicator_;    // the tensor axis's channel (MPI: communicator_)
  std::shared_ptr<comm::Communicator> pipeline_communicator_;  // the pipeline axis's channel (MPI: communicator_)
  std::shared_ptr<comm::Communicator> expert_communicator_;    // the expert axis's channel (MPI: communicator_)
  std::unique_ptr<comm::ProcessGroup> all_workers_, data_group_, tensor_group_, pipeline_group_, embedding_group_;
  std::unique_ptr<comm::ProcessGroup> expert_group_, expert_data_group_;
  std::unique_ptr<nn::TensorParallelComm> tensor_comm_;
  std::unique_ptr<nn::ExpertParallelComm> expert_comm_;
};

}  // namespace meshtrain
