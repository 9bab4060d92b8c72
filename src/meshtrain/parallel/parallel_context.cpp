#include "meshtrain/parallel/parallel_context.hpp"

#include <algorithm>

#include "meshtrain/comm/bootstrap/connect.hpp"
#include "meshtrain/comm/reduction_server/groups.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/parallel/device_collectives.hpp"
#include "meshtrain/parallel/expert/device_expert_group.hpp"
#include "meshtrain/parallel/expert/expert_parallel_group.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/parallel/tensor/device_tensor_group.hpp"
#include "meshtrain/parallel/tensor/tensor_parallel_group.hpp"

namespace meshtrain::parallel {

namespace {

// Without data parallelism and tensor parallelism a job is one process:
// several ranks would each train the whole job alone and overwrite one
// another's checkpoints.
void check_lone_process(const ContextSettings& s) {
  const comm::LaunchEnv env = comm::read_launch_env();
  if (env.world_size > 1)
    throw ConfigError("this process is rank " + std::to_string(env.rank) + " of " + std::to_string(env.world_size) +
                      " but parallel.data = \"" + s.data + "\": set parallel.data = \"allreduce\" to train "
                      "together, or start one process");
}

}  // namespace

ParallelContext::ParallelContext(const ContextSettings& s, const AgreementCheck& agree) {
  if (!s.data_parallel && s.tensor == 1 && s.pipeline == 1) {
    check_lone_process(s);
    return;
  }
  comm::LaunchEnv env = comm::read_launch_env();
  place(s, env);
  if (env.world_size == 1) return;
  cut(s, connect(s, env), agree);
  if (algorithm_ == comm::AllReduceAlgorithm::ReductionServer) use_reducers(env.num_servers);
  use_devices(s);
}

ParallelContext::ParallelContext(const ContextSettings& s, comm::DeviceMesh mesh, const comm::MeshChannels& channels,
                                 const AgreementCheck& agree)
    : worker_rank_(channels.main ? channels.main->rank() : 0), mesh_(std::move(mesh)), algorithm_(s.all_reduce) {
  cut(s, channels, agree);
  use_devices(s);
}

void ParallelContext::place(const ContextSettings& s, const comm::LaunchEnv& env) {
  algorithm_ = s.all_reduce;
  if (algorithm_ == comm::AllReduceAlgorithm::ReductionServer && env.num_servers == 0)
    throw ConfigError("parallel.all_reduce = \"reduction_server\" needs reducer processes: start the job with "
                      "`meshtrain run` (parallel.reducers) or `meshtrain launch --reducers R`");
  if (env.role == "server")
    throw ConfigError("rank " + std::to_string(env.rank) + " is a pool-2 server rank (the last " +
                      std::to_string(env.num_servers) + " ranks); run `meshtrain reducer` there, not `train`");
  try {
    mesh_ = comm::DeviceMesh(comm::MeshShape{.dp = -1, .tp = s.tensor, .pp = s.pipeline, .ep = s.expert},
                             env.num_workers());
  } catch (const ConfigError& e) {
    throw ConfigError(std::to_string(env.num_workers()) + " workers do not split into tensor groups of " +
                      "parallel.tensor = " + std::to_string(s.tensor) + ", pipelines of parallel.pipeline = " +
                      std::to_string(s.pipeline) + " stages and expert groups of parallel.expert = " +
                      std::to_string(s.expert) + " data ranks (" + e.what() + ")");
  }
  if (!s.data_parallel && data_size() > 1)
    throw ConfigError(std::to_string(env.num_workers()) + " workers at parallel.tensor = " + std::to_string(s.tensor) +
                      " and parallel.pipeline = " + std::to_string(s.pipeline) + " make " +
                      std::to_string(data_size()) + " data-parallel ways, but parallel.data = \"" + s.data +
                      "\": set parallel.data = \"allreduce\", or start " + std::to_string(s.tensor * s.pipeline) +
                      " processes");
  worker_rank_ = env.rank;
  local_size_ = env.local_world_size;
}

comm::MeshChannels ParallelContext::connect(const ContextSettings& s, comm::LaunchEnv& env) {
  comm::TransportOptions options;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(s.timeout_s * 1000));
  // Every axis but data with more than one way gets a channel of its own
  // (its own transport and communication thread, connect.hpp), named after
  // the axis: the tensor axis's all-reduces inside every layer never queue
  // behind a data-parallel gradient bucket, a pipeline stage's activations
  // never wait behind either, and the expert axis's all-to-alls, inside
  // every MoE layer's forward and backward, run beside the overlapped
  // gradient buckets. The data axis runs on the main channel.
  std::vector<comm::MeshAxis> own;
  std::vector<std::string> names{""};
  for (comm::MeshAxis axis : comm::kMeshAxes)
    if (axis != comm::MeshAxis::Data && mesh_.size(axis) > 1) {
      own.push_back(axis);
      names.push_back(comm::mesh_axis_name(axis));
    }
  auto transports = comm::connect_transports(env, s.transport, options, names);
  local_size_ = env.local_world_size;  // learned at rendezvous where the launcher did not say
  comm::MeshChannels channels{.main = std::make_shared<comm::Communicator>(std::move(transports[0])), .own = {}};
  // MPI gives one transport for every channel: the axes share the main one.
  for (size_t i = 0; i < own.size() && i + 1 < transports.size(); ++i)
    channels.own[size_t(own[i])] = std::make_shared<comm::Communicator>(std::move(transports[i + 1]));
  return channels;
}

void ParallelContext::cut(const ContextSettings& s, const comm::MeshChannels& channels, const AgreementCheck& agree) {
  channels_ = channels;
  groups_ = comm::mesh_groups(mesh_, channels_);
  if (agree) agree(*groups_.all);  // before anything waits on a collective the others may never make
}

void ParallelContext::use_devices(const ContextSettings& s) {
  device_collectives_ = use_device_collectives(groups_, s.device_collectives, s.device, s.timeout_s);
  // The CPU's layers call the host groups directly; a device's, its device collectives.
  if (auto* tensor = groups_.find(comm::MeshAxis::Tensor)) {
    if (s.device.is_cpu()) {
      tensor_comm_ = std::make_unique<TensorParallelGroup>(*tensor, s.sequence_parallel, s.reduce_dtype);
    } else {
      kernels::Backend& backend = kernels::backend_for(s.device);
      tensor_comm_ = std::make_unique<DeviceTensorGroup>(device_collectives_for(*tensor, &backend.allocator()),
                                                         backend, s.sequence_parallel, s.reduce_dtype);
    }
  }
  if (auto* expert = groups_.find(comm::MeshAxis::Expert)) {
    if (s.device.is_cpu()) {
      expert_comm_ = std::make_unique<ExpertParallelGroup>(*expert, s.reduce_dtype);
    } else {
      kernels::Backend& backend = kernels::backend_for(s.device);
      expert_comm_ = std::make_unique<DeviceExpertGroup>(device_collectives_for(*expert, &backend.allocator()),
                                                         *expert, backend, s.reduce_dtype);
    }
  }
}

// The reducers split among the data-parallel groups, one per tensor rank
// (reduction_server/groups.hpp); worker 0 tells them how.
void ParallelContext::use_reducers(int reducers) {
  namespace rs = comm::reduction_server;
  const int workers = mesh_.workers(), groups = tensor_size();
  const rs::GroupRanks mine = rs::group_ranks(workers, reducers, groups, tensor_rank());
  if (is_lead()) {
    channels_.main->run_blocking(
        [] { return std::string("telling the reducers the data-parallel groups"); },
        [&](comm::Transport& t) { rs::announce_groups(t, workers, reducers, uint32_t(groups)); });
  }
  groups_[comm::MeshAxis::Data].use_reducers(mine.reducers);
}

ParallelContext::~ParallelContext() {
  comm::ProcessGroup* data = groups_.find(comm::MeshAxis::Data);
  if (!data || !data->has_reducers()) return;
  try {
    data->shutdown_reducers_async()->wait();
  } catch (const std::exception&) {
    // The job is ending anyway; a reducer that already went away changes nothing.
  }
}

const char* ParallelContext::transport_name() const {
  return channels_.main ? channels_.main->transport_name().c_str() : "none";
}

uint64_t ParallelContext::bytes_sent() const {
  uint64_t sent = 0;
  for (const comm::ProcessGroup* g : {groups_.all.get(), groups_.find(comm::MeshAxis::Data),
                                      groups_.find(comm::MeshAxis::Tensor), groups_.find(comm::MeshAxis::Pipeline),
                                      groups_.embedding.get(), groups_.find(comm::MeshAxis::Expert),
                                      groups_.expert_data.get()})
    if (g) sent += g->bytes_sent();
  return sent;
}

void ParallelContext::sum_over(comm::MeshAxis axis, std::span<double> values) {
  // One way along the axis: nothing to add.
  if (size(axis) > 1) groups_[axis].all_reduce(values, comm::ReduceKind::Sum);
}

void ParallelContext::data_sum(std::span<double> values) { sum_over(comm::MeshAxis::Data, values); }
void ParallelContext::tensor_sum(std::span<double> values) { sum_over(comm::MeshAxis::Tensor, values); }
void ParallelContext::expert_sum(std::span<double> values) { sum_over(comm::MeshAxis::Expert, values); }
void ParallelContext::pipeline_sum(std::span<double> values) { sum_over(comm::MeshAxis::Pipeline, values); }

std::vector<std::vector<double>> ParallelContext::all_gather_workers(std::span<const double> values) {
  if (!groups_.all) return {std::vector<double>(values.begin(), values.end())};
  // The lengths first, then every rank's values padded to the longest.
  const auto n = static_cast<size_t>(workers());
  std::vector<int64_t> length{static_cast<int64_t>(values.size())}, lengths(n);
  groups_.all->all_gather(length, lengths);
  const auto longest = static_cast<size_t>(*std::max_element(lengths.begin(), lengths.end()));
  std::vector<double> mine(longest, 0.0), all(longest * n);
  std::copy(values.begin(), values.end(), mine.begin());
  groups_.all->all_gather(mine, all);
  std::vector<std::vector<double>> out(n);
  for (size_t r = 0; r < n; ++r)
    out[r].assign(all.begin() + std::ptrdiff_t(r * longest),
                  all.begin() + std::ptrdiff_t(r * longest + size_t(lengths[r])));
  return out;
}

int64_t ParallelContext::broadcast_from_lead(int64_t value) {
  if (groups_.all) groups_.all->broadcast(std::span<int64_t>(&value, 1), 0);
  return value;
}

int64_t ParallelContext::max_over_workers(int64_t value) {
  double v = static_cast<double>(value);  // exact: the values are small
  if (groups_.all) groups_.all->all_reduce(std::span<double>(&v, 1), comm::ReduceKind::Max);
  return static_cast<int64_t>(v);
}

}  // namespace meshtrain::parallel
