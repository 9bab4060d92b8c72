#pragma once
// A synchronous job's parallel context as one worker sees it: the device
// mesh the workers form (comm/mesh/device_mesh.hpp: pipeline x data x tensor
// ways, tensor fastest, expert ways inside the data ways), this worker's
// place in it, and the process groups cut from it in one call
// (comm/mesh/mesh_groups.hpp): the data-parallel group its gradients are
// reduced over (and, under expert parallelism, the expert group its tokens
// travel in and the expert-data group its expert gradients are reduced
// over), the tensor-parallel group its layers exchange activations in, the
// pipeline group its stages pass micro-batches along (and the first and last
// stage's pair, which sums the tied embedding's gradient), and all the
// workers (for the lead's decisions: resume step, checkpoint directory).
//
// Names say their axis: data_rank() / data_size() / data_sum() are the data
// axis's, tensor_*, pipeline_* and expert_* theirs; worker_rank() and
// workers() count every worker (data x tensor x pipeline; reducers are
// outside the mesh).
//
// Built from the launch environment (comm/bootstrap/launch_env.hpp) and the
// job's [parallel] settings (ContextSettings); a job without data, tensor or
// pipeline parallelism, or a single worker, gets rank 0 of 1 and no
// communication at all. Tests build one over transports already connected.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "meshtrain/comm/bootstrap/launch_env.hpp"
#include "meshtrain/comm/bootstrap/transport_kind.hpp"
#include "meshtrain/comm/device/device_collectives_choice.hpp"
#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/comm/mesh/device_mesh.hpp"
#include "meshtrain/comm/mesh/mesh_groups.hpp"
#include "meshtrain/core/device.hpp"
#include "meshtrain/core/precision.hpp"
#include "meshtrain/nn/moe/expert_parallel.hpp"
#include "meshtrain/nn/tensor_parallel.hpp"

namespace meshtrain::parallel {

// The [parallel] settings the context is built from (train/'s
// ParallelSection, resolved by train/config/section_configs.hpp).
struct ContextSettings {
  bool data_parallel = false;   // parallel.data = "allreduce": the data ways train together
  std::string data = "none";    // parallel.data as written, for messages
  comm::AllReduceAlgorithm all_reduce = comm::AllReduceAlgorithm::Auto;
  int tensor = 1, pipeline = 1, expert = 1;  // ways; the data ways are the rest of the workers
  bool sequence_parallel = false;
  Precision reduce_dtype = Precision::Fp32;  // the tensor and expert groups' wire
  comm::TransportKind transport = comm::TransportKind::Auto;
  // What carries the device collectives off the CPU (device_collectives.hpp).
  comm::DeviceCollectivesKind device_collectives = comm::DeviceCollectivesKind::Auto;
  double timeout_s = 300;       // longest wait for a peer
  // Where the layers' tensors live (training.device): off the CPU the
  // tensor group runs on the device collectives
  // (tensor/device_tensor_group.hpp).
  Device device{};
};

// Checks, over all the workers, that they run the same job (train/'s
// rank_agreement.hpp); run before anything waits on a collective the others
// may never make.
using AgreementCheck = std::function<void(comm::ProcessGroup& workers)>;

class ParallelContext {
 public:
  // Connects to the other workers (and the reducers, when the all-reduce is
  // reduction_server), then runs `agree`. Throws ConfigError for an
  // environment that does not fit the settings (a world that is not a
  // multiple of parallel.tensor, ...), CommError when peers do not show up
  // within timeout_s.
  ParallelContext(const ContextSettings& settings, const AgreementCheck& agree);
  // Over communicators already connected (each axis on its channel, or on
  // `channels.main`), for this process's rank of `mesh`; no reducers.
  ParallelContext(const ContextSettings& settings, comm::DeviceMesh mesh, const comm::MeshChannels& channels,
                  const AgreementCheck& agree = {});
  // Lets the reducers go (when there are any) and closes the connections.
  ~ParallelContext();
  ParallelContext(const ParallelContext&) = delete;
  ParallelContext& operator=(const ParallelContext&) = delete;

  const comm::DeviceMesh& mesh() const { return mesh_; }
  // Ways along `axis`, and this worker's coordinate on it.
  int size(comm::MeshAxis axis) const { return mesh_.size(axis); }
  int coord(comm::MeshAxis axis) const { return mesh_.coord(worker_rank_)[axis]; }

  // Data-parallel rank and ways: which share of the global batch this
  // worker reads, and what its gradients are averaged over. Tensor ranks
  // of one group share the same data rank (and batch).
  int data_rank() const { return coord(comm::MeshAxis::Data); }
  int data_size() const { return size(comm::MeshAxis::Data); }
  // Tensor-parallel rank and ways.
  int tensor_rank() const { return coord(comm::MeshAxis::Tensor); }
  int tensor_size() const { return size(comm::MeshAxis::Tensor); }
  // Pipeline stage (rank in the pipeline group) and stages.
  int pipeline_rank() const { return coord(comm::MeshAxis::Pipeline); }
  int pipeline_size() const { return size(comm::MeshAxis::Pipeline); }
  // Expert-parallel ways (inside the data ways) and this worker's place
  // among them.
  int expert_rank() const { return coord(comm::MeshAxis::Expert); }
  int expert_size() const { return size(comm::MeshAxis::Expert); }
  // The data ranks that hold this worker's experts: their rank among
  // themselves and how many (data_size() / expert_size()).
  int expert_data_rank() const { return data_rank() / expert_size(); }
  int expert_data_size() const { return data_size() / expert_size(); }
  // Position among all the workers, and how many there are (data x tensor x
  // pipeline).
  int worker_rank() const { return worker_rank_; }
  int workers() const { return mesh_.workers(); }
  // Processes of this job on this host (workers, and reducers when present).
  int local_size() const { return local_size_; }
  bool is_lead() const { return worker_rank_ == 0; }

  // The groups cut from the mesh (empty for a lone process).
  const comm::MeshGroups& groups() const { return groups_; }
  // The data-parallel group; null when there is one data-parallel way.
  comm::ProcessGroup* data_group() { return data_size() > 1 ? groups_.find(comm::MeshAxis::Data) : nullptr; }
  // The tensor-parallel group as nn/'s layers take it; null for tensor = 1.
  // It has a communication channel of its own (comm/bootstrap/connect.hpp).
  nn::TensorParallelComm* tensor_group() { return tensor_comm_.get(); }
  // The expert group as nn/'s MoE layers take it (its all-to-alls on a
  // channel of its own); null for expert = 1.
  nn::ExpertParallelComm* expert_group() { return expert_comm_.get(); }
  // The data ranks holding this worker's experts; null when that is one.
  comm::ProcessGroup* expert_data_group() { return expert_data_size() > 1 ? groups_.expert_data.get() : nullptr; }
  // The pipeline group, on a channel of its own; null for pipeline = 1.
  comm::ProcessGroup* pipeline_group() { return groups_.find(comm::MeshAxis::Pipeline); }
  // The first and the last stage of this worker's pipeline (group ranks 0
  // and 1), which hold the tied embedding; null elsewhere and for
  // pipeline = 1.
  comm::ProcessGroup* embedding_group() { return groups_.embedding.get(); }
  comm::AllReduceAlgorithm algorithm() const { return algorithm_; }
  const char* transport_name() const;
  // What carries the groups' device collectives, and why (the job's log);
  // host-staged for a lone process.
  const comm::DeviceCollectivesChoice& device_collectives() const { return device_collectives_; }
  // Bytes this process has sent in every group so far.
  uint64_t bytes_sent() const;

  // Sums `values` over the data-parallel ranks, in place (a no-op for one).
  void data_sum(std::span<double> values);
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
  // This process's place in the mesh of workers `env` describes.
  void place(const ContextSettings& s, const comm::LaunchEnv& env);
  // Its transports, one channel per axis with more than one way.
  comm::MeshChannels connect(const ContextSettings& s, comm::LaunchEnv& env);
  // The groups cut from the mesh, and the agreement check.
  void cut(const ContextSettings& s, const comm::MeshChannels& channels, const AgreementCheck& agree);
  // What carries the device collectives (device_collectives.hpp), then nn/'s
  // views of the tensor and expert groups, which use them.
  void use_devices(const ContextSettings& s);
  // The data group's share of the reducers (reduction_server/groups.hpp).
  void use_reducers(int reducers);
  void sum_over(comm::MeshAxis axis, std::span<double> values);

  int worker_rank_ = 0, local_size_ = 1;
  comm::DeviceMesh mesh_{comm::MeshShape{}, 1};
  comm::AllReduceAlgorithm algorithm_ = comm::AllReduceAlgorithm::Auto;
  comm::DeviceCollectivesChoice device_collectives_{.nccl = false, .why = "one worker"};
  comm::MeshChannels channels_;
  comm::MeshGroups groups_;
  std::unique_ptr<nn::TensorParallelComm> tensor_comm_;
  std::unique_ptr<nn::ExpertParallelComm> expert_comm_;
};

}  // namespace meshtrain::parallel
