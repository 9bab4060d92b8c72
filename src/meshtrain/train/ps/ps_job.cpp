#include "meshtrain/train/ps/ps_job.hpp"

#include <string>

#include "meshtrain/core/error.hpp"

namespace meshtrain {

PsJob read_ps_job(const ParallelSection& parallel, const char* role) {
  PsJob job;
  job.env = comm::read_launch_env();
  const comm::LaunchEnv& e = job.env;
  const std::string is_server = e.role == "server" ? "server" : "worker";
  if (e.num_servers < 1)
    throw ConfigError("parallel.data = parameter_server: MESHTRAIN_NUM_SERVERS is not set; the last "
                      "parallel.servers ranks of WORLD_SIZE are the servers (`meshtrain run` sets it)");
  if (e.num_servers != parallel.servers)
    throw ConfigError("parallel.servers = " + std::to_string(parallel.servers) +
                      " but MESHTRAIN_NUM_SERVERS = " + std::to_string(e.num_servers));
  if (e.server_addrs.size() != static_cast<size_t>(e.num_servers))
    throw ConfigError("MESHTRAIN_SERVER_ADDRS: need " + std::to_string(e.num_servers) +
                      " comma-separated host:port addresses, one per server, got " +
                      std::to_string(e.server_addrs.size()));
  if (is_server != role)
    throw ConfigError("rank " + std::to_string(e.rank) + " of " + std::to_string(e.world_size) + " is a " +
                      is_server + " rank (servers are ranks " + std::to_string(e.num_workers()) + ".." +
                      std::to_string(e.world_size - 1) + "), not a " + role +
                      (is_server == "server" ? "; run `meshtrain ps-server` there" : ""));
  for (const auto& a : e.server_addrs) {
    try {
      job.servers.push_back(comm::tcp::parse_endpoint(a));
    } catch (const CommError& err) {
      throw ConfigError("MESHTRAIN_SERVER_ADDRS: '" + a + "': " + err.what());
    }
  }
  job.timeout = std::chrono::milliseconds(static_cast<int64_t>(parallel.timeout_s * 1000));
  return job;
}

}  // namespace meshtrain
