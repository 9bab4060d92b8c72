#include "meshtrain/train/engine/worker_group.hpp"

#include <algorithm>
#include <numeric>

#include "meshtrain/comm/bootstrap/connect.hpp"
#include "meshtrain/comm/reduction_server/groups.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/parallel/expert/expert_parallel_group.hpp"
#include "meshtrain/parallel/tensor/tensor_parallel_group.hpp"

namespace meshtrain {

namespace {

// Without data parallelism and tensor parallelism a job is one process:
// several ranks would each train the whole job alone and overwrite one
// another's checkpoints.
void check_lone_process(const ParallelSection& p) {
  const comm::LaunchEnv env = comm::read_launch_env();
  if (env.world_size > 1)
    throw ConfigError("this process is rank " + std::to_string(env.rank) + " of " + std::to_string(env.world_size) +
                      " but parallel.data = \"" + enum_string(p.data) + "\": set parallel.data = \"allreduce\" to train "
                      "together, or start one process");
}

}  // namespace

WorkerGroup::WorkerGroup(const ParallelSection& p, const SharedSettings& shared) {
  if (p.data != DataParallelism::AllReduce && p.tensor == 1 && p.pipeline == 1) {
    check_lone_process(p);
    return;
  }
  comm::LaunchEnv env = comm::read_launch_env();
  place(p, env);
  if (env.world_size > 1) connect(p, env, shared);
}

void WorkerGroup::place(const ParallelSection& p, const comm::LaunchEnv& env) {
  const int tensor = static_cast<int>(p.tensor);
  algorithm_ = p.all_reduce;
  if (algorithm_ == comm::AllReduceAlgorithm::ReductionServer && env.num_servers == 0)
    throw ConfigError("parallel.all_reduce = \"reduction_server\" needs reducer processes: start the job with "
                      "`meshtrain run` (parallel.reducers) or `meshtrain launch --reducers R`");
  if (env.role == "server")
    throw ConfigError("rank " + std::to_string(env.rank) + " is a pool-2 server rank (the last " +
                      std::to_string(env.num_servers) + " ranks); run `meshtrain reducer` there, not `train`");
  const int pipeline = static_cast<int>(p.pipeline), expert = static_cast<int>(p.expert);
  try {
    mesh_ = comm::DeviceMesh(comm::MeshShape{.dp = -1, .tp = tensor, .pp = pipeline, .ep = expert}, env.num_workers());
  } catch (const ConfigError& e) {
    throw ConfigError(std::to_string(env.num_workers()) + " workers do not split into tensor groups of " +
                      "parallel.tensor = " + std::to_string(tensor) + ", pipelines of parallel.pipeline = " +
                      std::to_string(pipeline) + " stages and expert groups of parallel.expert = " +
                      std::to_string(expert) + " data ranks (" + e.what() + ")");
  }
  if (p.data != DataParallelism::AllReduce && size() > 1)
    throw ConfigError(std::to_string(env.num_workers()) + " workers at parallel.tensor = " + std::to_string(tensor) +
                      " and parallel.pipeline = " + std::to_string(pipeline) + " make " + std::to_string(size()) +
                      " data-parallel ways, but parallel.data = \"" + enum_string(p.data) +
                      "\": set parallel.data = \"allreduce\", or start " + std::to_string(tensor * pipeline) +
                      " processes");
  worker_rank_ = env.rank;
  local_size_ = env.local_world_size;
}

void WorkerGroup::connect(const ParallelSection& p, comm::LaunchEnv& env, const SharedSettings& shared) {
  const bool tensor = p.tensor > 1, pipeline = p.pipeline > 1, expert = p.expert > 1;
  comm::TransportOptions options;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(p.timeout_s * 1000));
  // The tensor axis gets a channel of its own (its own transport and
  // communication thread), so its all-reduces inside every layer never
  // queue behind a data-parallel gradient bucket (connect.hpp).
  // So does the pipeline axis: a stage's activations never wait behind
  // either.
  std::vector<std::string> channels{""};
  if (tensor) channels.push_back("tp");
  if (pipeline) channels.push_back("pp");
  // And the expert axis: its all-to-alls run inside every MoE layer's
  // forward and backward, beside the overlapped gradient buckets.
  if (expert) channels.push_back("ep");
  auto transports = comm::connect_transports(env, p.transport, options, channels);
  communicator_ = std::make_shared<comm::Communicator>(std::move(transports[0]));
  // MPI gives one transport for every channel: the axes share it.
  auto channel = [&](const char* name) {
    const size_t i = size_t(std::find(channels.begin(), channels.end(), name) - channels.begin());
    return i < transports.size() ? std::make_shared<comm::Communicator>(std::move(transports[i])) : communicator_;
  };
  tensor_communicator_ = tensor ? channel("tp") : communicator_;
  pipeline_communicator_ = pipeline ? channel("pp") : communicator_;
  expert_communicator_ = expert ? channel("ep") : communicator_;
  local_size_ = env.local_world_size;  // learned at rendezvous where the launcher did not say
  std::vector<int> workers(static_cast<size_t>(mesh_.workers()));
  std::iota(workers.begin(), workers.end(), 0);
  all_workers_ = std::make_unique<comm::ProcessGroup>(communicator_, workers, "all");
  check_ranks_agree(shared, *all_workers_);  // before anything waits on a collective the others may never make
  data_group_ = std::make_unique<comm::ProcessGroup>(communicator_,
                                                     mesh_.group_ranks(comm::MeshAxis::Data, worker_rank_), "data");
  if (tensor) {
    tensor_group_ = std::make_unique<comm::ProcessGroup>(tensor_communicator_,
                                                         mesh_.group_ranks(comm::MeshAxis::Tensor, worker_rank_), "tensor");
    tensor_comm_ = std::make_unique<parallel::TensorParallelGroup>(*tensor_group_, p.sequence_parallel, p.reduce_dtype);
  }
  if (expert) {
    expert_group_ = std::make_unique<comm::ProcessGroup>(expert_communicator_,
                                                         mesh_.group_ranks(comm::MeshAxis::Expert, worker_rank_), "expert");
    expert_comm_ = std::make_unique<parallel::ExpertParallelGroup>(*expert_group_, p.reduce_dtype);
    expert_data_group_ =
        std::make_unique<comm::ProcessGroup>(communicator_, mesh_.expert_data_ranks(worker_rank_), "expert_data");
  }
  if (pipeline) {
    const std::vector<int> stages = mesh_.group_ranks(comm::MeshAxis::Pipeline, worker_rank_);
    pipeline_group_ = std::make_unique<comm::ProcessGroup>(pipeline_communicator_, stages, "pipeline");
    if (worker_rank_ == stages.front() || worker_rank_ == stages.back())
      embedding_group_ = std::make_unique<comm::ProcessGroup>(pipeline_communicator_,
                                                              std::vector<int>{stages.front(), stages.back()},
                                                              "embedding");
  }
  if (algorithm_ == comm::AllReduceAlgorithm::ReductionServer) use_reducers(env.num_servers);
}

// The reducers split among the data-parallel groups, one per tensor rank
// (reduction_server/groups.hpp); worker 0 tells them how.
void WorkerGroup::use_reducers(int reducers) {
  namespace rs = comm::reduction_server;
  const int workers = mesh_.workers(), groups = tensor_size();
  const rs::GroupRanks mine = rs::group_ranks(workers, reducers, groups, tensor_rank());
  if (is_lead()) {
    communicator_->run_blocking([] { return std::string("telling the reducers the data-parallel groups"); },
                                [&](comm::Transport& t) { rs::announce_groups(t, workers, reducers, uint32_t(groups)); });
  }
  data_group_->use_reducers(mine.reducers);
}

WorkerGroup::~WorkerGroup() {
  if (!data_group_ || !data_group_->has_reducers()) return;
  try {
    data_group_->shutdown_reducers_async()->wait();
  } catch (const std::exception&) {
    // The job is ending anyway; a reducer that already went away changes nothing.
  }
}

const char* WorkerGroup::transport_name() const {
  return communicator_ ? communicator_->transport_name().c_str() : "none";
}

uint64_t WorkerGroup::bytes_sent() const {
  uint64_t sent = 0;
  for (const auto* g : {all_workers_.get(), data_group_.get(), tensor_group_.get(), pipeline_group_.get(),
                        embedding_group_.get(), expert_group_.get(), expert_data_group_.get()})
    if (g) sent += g->bytes_sent();
  return sent;
}

void WorkerGroup::sum(std::span<double> values) {
  if (group()) group()->all_reduce(values, comm::ReduceKind::Sum);
}

void WorkerGroup::tensor_sum(std::span<double> values) {
  if (tensor_group_) tensor_group_->all_reduce(values, comm::ReduceKind::Sum);
}

void WorkerGroup::expert_sum(std::span<double> values) {
  if (expert_group_) expert_group_->all_reduce(values, comm::ReduceKind::Sum);
}

void WorkerGroup::pipeline_sum(std::span<double> values) {
  if (pipeline_group_) pipeline_group_->all_reduce(values, comm::ReduceKind::Sum);
}

std::vector<std::vector<double>> WorkerGroup::all_gather_workers(std::span<const double> values) {
  if (!all_workers_) return {std::vector<double>(values.begin(), values.end())};
  // The lengths first, then every rank's values padded to the longest.
  const auto n = static_cast<size_t>(workers());
  std::vector<int64_t> length{static_cast<int64_t>(values.size())}, lengths(n);
  all_workers_->all_gather(length, lengths);
  const auto longest = static_cast<size_t>(*std::max_element(lengths.begin(), lengths.end()));
  std::vector<double> mine(longest, 0.0), all(longest * n);
  std::copy(values.begin(), values.end(), mine.begin());
  all_workers_->all_gather(mine, all);
  std::vector<std::vector<double>> out(n);
  for (size_t r = 0; r < n; ++r)
    out[r].assign(all.begin() + std::ptrdiff_t(r * longest), all.begin() + std::ptrdiff_t(r * longest + size_t(lengths[r])));
  return out;
}

int64_t WorkerGroup::broadcast_from_lead(int64_t value) {
  if (all_workers_) all_workers_->broadcast(std::span<int64_t>(&value, 1), 0);
  return value;
}

int64_t WorkerGroup::max_over_workers(int64_t value) {
  double v = static_cast<double>(value);  // exact: the values are small
  if (all_workers_) all_workers_->all_reduce(std::span<double>(&v, 1), comm::ReduceKind::Max);
  return static_cast<int64_t>(v);
}

}  // namespace meshtrain
