#include "meshtrain/cluster/local_job.hpp"

#include <cstdio>

#include "meshtrain/cluster/local_launcher.hpp"
#include "meshtrain/cluster/pool_check.hpp"

namespace meshtrain {
namespace {

// The job's own config and overrides after `meshtrain <subcommand>`.
std::vector<std::string> config_command(const LocalJobRequest& r, const char* subcommand) {
  std::vector<std::string> argv = {r.self, subcommand, r.config_path};
  argv.insert(argv.end(), r.overrides.begin(), r.overrides.end());
  return argv;
}

}  // namespace

std::vector<Replica> plan_local_job(const ParallelSection& p, const LocalJobRequest& request) {
  const int workers = request.nproc > 0 ? request.nproc : static_cast<int>(p.workers);
  const bool reducers = p.all_reduce == comm::AllReduceAlgorithm::ReductionServer;
  const bool ps = p.data == DataParallelism::ParameterServer;
  const int servers = reducers ? (p.reducers > 0 ? static_cast<int>(p.reducers) : workers)
                      : ps     ? static_cast<int>(p.servers)
                               : 0;
  const int evaluators = static_cast<int>(p.evaluators);
  check_pools_fit_config({workers, servers, evaluators}, p, "run: ");

  WorldInfo world = new_local_world(workers + servers, servers);
  world.transport = p.transport;
  if (ps)
    for (int j = 0; j < servers; ++j)
      world.server_addrs.push_back("127.0.0.1:" + std::to_string(pick_free_port("127.0.0.1")));

  char timeout[32];
  std::snprintf(timeout, sizeof timeout, "%g", p.timeout_s);
  std::vector<Replica> replicas;
  std::vector<std::string> train = config_command(request, "train");
  train.push_back("--resume");
  // An asynchronous job goes on without a dead worker; a restarted one
  // rejoins. Any other failure restarts the whole group (the supervisor).
  const int restarts = ps ? static_cast<int>(p.max_restarts) : 0;
  for (int r = 0; r < workers; ++r)
    replicas.push_back(
        {"worker " + std::to_string(r), train, rank_environment(world, r), ReplicaKind::Worker, restarts});
  for (int j = 0; j < servers; ++j) {
    Replica server{
        reducers ? "reducer " + std::to_string(j) : "server " + std::to_string(j),
        reducers ? std::vector<std::string>{request.self, "reducer", "--transport", enum_string(p.transport),
                                            "--timeout", timeout}
                 : config_command(request, "ps-server"),
        rank_environment(world, workers + j), ReplicaKind::Service};
    replicas.push_back(std::move(server));
  }
  for (int k = 0; k < evaluators; ++k)
    replicas.push_back(
        {"evaluator " + std::to_string(k), config_command(request, "evaluator"), {}, ReplicaKind::Auxiliary});
  return replicas;
}

SupervisorOptions local_job_supervision(const ParallelSection& parallel) {
  const auto ms = [](double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000 + 0.5)); };
  SupervisorOptions options;
  options.name = "run";
  options.max_restarts = static_cast<int>(parallel.max_restarts);
  options.restart_backoff = ms(parallel.restart_backoff_s);
  options.heartbeat_timeout = ms(parallel.heartbeat_timeout_s);
  options.stop_grace = ms(parallel.stop_grace_s);
  return options;
}

SupervisorOptions local_job_supervision(const JobConfig& config) {
  SupervisorOptions options = local_job_supervision(config.parallel);
  options.flight_dir = config.training.out_dir;
  return options;
}

}  // namespace meshtrain
