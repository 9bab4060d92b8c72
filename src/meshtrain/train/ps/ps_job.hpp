#pragma once
// A parameter-server job as its launch environment describes it, checked
// against the job config, for both roles: workers are ranks
// 0..num_workers-1, servers the last parallel.servers ranks, listening on
// MESHTRAIN_SERVER_ADDRS (see comm/bootstrap/launch_env.hpp).
#include <chrono>
#include <vector>

#include "meshtrain/comm/bootstrap/launch_env.hpp"
#include "meshtrain/comm/transport/tcp/socket.hpp"
#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain {

struct PsJob {
  comm::LaunchEnv env;
  std::vector<comm::tcp::Endpoint> servers;  // server j's address, j = 0..P-1
  std::chrono::milliseconds timeout{300000};  // parallel.timeout_s
};

// Reads the environment; ConfigError naming the variable or key when it does
// not describe a parameter-server job of the [parallel] section whose `role`
// ("worker" or "server") this rank is.
PsJob read_ps_job(const ParallelSection& parallel, const char* role);

}  // namespace meshtrain
