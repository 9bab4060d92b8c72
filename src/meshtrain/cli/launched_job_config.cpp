#include "meshtrain/cli/launched_job_config.hpp"

#include "meshtrain/comm/bootstrap/launch_env.hpp"
#include "meshtrain/train/config/config_schema.hpp"

namespace meshtrain::cli {

JobConfig load_launched_job_config(const std::string& path, std::vector<std::string> overrides) {
  const comm::LaunchEnv env = comm::read_launch_env();
  // Last, so it wins over the file and over a --parallel.workers given too.
  if (env.launcher != "none" && env.num_workers() >= 1)
    overrides.push_back("--parallel.workers=" + std::to_string(env.num_workers()));
  return load_job_config(path, overrides);
}

}  // namespace meshtrain::cli
