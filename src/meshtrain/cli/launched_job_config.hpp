#pragma once
// The job config of a process that a launcher started (`meshtrain train`,
// `ps-server`, `evaluator` under `meshtrain run` or `launch`, torchrun,
// srun, mpirun, a CustomJob's CLUSTER_SPEC): the config file and the
// command line's overrides, with parallel.workers set to the workers the
// launcher started (its world less pool 2), validated once. The world is
// what the job has whatever the file says: `meshtrain launch --nproc 8 --
// meshtrain train tiny-gpt.toml --parallel.tensor=2 --parallel.pipeline=2`
// is a valid job although the file says parallel.workers = 2 (the number of
// workers `meshtrain run` starts). With no launcher the file and the
// overrides decide, as for any command.
#include <string>
#include <vector>

#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain::cli {

JobConfig load_launched_job_config(const std::string& path, std::vector<std::string> overrides);

}  // namespace meshtrain::cli
