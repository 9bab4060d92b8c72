#pragma once
// `meshtrain run`: the processes a job config names, on this host.
//
//   workers     parallel.workers (or --nproc) x `meshtrain train CONFIG ...`,
//               ranks 0 .. W-1
//   reducers    all_reduce = "reduction_server": parallel.reducers (0: W) x
//               `meshtrain reducer --transport T --timeout S`, the last ranks
//   servers     data = "parameter_server": parallel.servers x
//               `meshtrain ps-server CONFIG ...`, the last ranks, each on a
//               free loopback port listed in MESHTRAIN_SERVER_ADDRS
//   evaluators  parallel.evaluators x `meshtrain evaluator CONFIG ...`,
//               outside the world (no RANK)
//
// Every rank gets the environment `meshtrain launch` sets
// (local_launcher.hpp); the command-line overrides go to every child
// unchanged (`meshtrain run` adds --nproc N as --parallel.workers=N), so
// they all read the same config. Workers always run with
// --resume: a restarted group, or the same `meshtrain run` command run again
// after a crash, continues from the newest complete checkpoint (and a
// finished job says so and exits).
#include <string>
#include <vector>

#include "meshtrain/cluster/replica_supervisor.hpp"
#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain {

struct LocalJobRequest {
  std::string self;                    // the meshtrain executable
  std::string config_path;
  std::vector<std::string> overrides;  // "--section.key=value", as given
  int nproc = 0;                       // workers; 0: parallel.workers
};

// The replicas of the job its [parallel] section describes, in rank order,
// evaluators last. Throws ConfigError when the pools do not fit it
// (pool_check.hpp).
std::vector<Replica> plan_local_job(const ParallelSection& parallel, const LocalJobRequest& request);

// How the supervisor treats the job: parallel.max_restarts whole-job
// restarts after parallel.restart_backoff_s, heartbeats after
// parallel.heartbeat_timeout_s (0: none).
SupervisorOptions local_job_supervision(const ParallelSection& parallel);
// The same, and the workers' flight recorder rings under training.out_dir
// (comm/flight/): a hang names its culprit.
SupervisorOptions local_job_supervision(const JobConfig& config);

}  // namespace meshtrain
