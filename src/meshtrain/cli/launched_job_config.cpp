#include "meshtrain/cli/launched_job_config.hpp"

#include "meshtrain/comm/bootstrap/launch_env.hpp"
#include "meshtrain/train/config/config_schema.hpp"

namespace meshtrain::cli {

JobConfig load_launched_job_config(const std::string& path, std::vector<std::string> overrides) {
  // Last, so it wins over the file and over a --parallel.workers given too
  // (`meshtrain run` passes its count on; it checked it itself).
  if (comm::read_launch_env().launcher != "none") overrides.push_back("--parallel.workers=1");
  return load_job_config(path, overrides);
}

}  // namespace meshtrain::cli
