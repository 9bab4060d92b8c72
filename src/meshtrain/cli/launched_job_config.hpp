#pragma once
// The job config of a process that a launcher started (`meshtrain train`,
// `ps-server`, `evaluator` under `meshtrain run` or `launch`, torchrun,
// srun, mpirun, a CustomJob's CLUSTER_SPEC): the config file and the
// command line's overrides, validated once, with parallel.workers = 1.
// parallel.workers is the number of workers `meshtrain run` starts; in a
// launched process the launcher has decided, and the job has the workers of
// its world whatever the file says, which the device mesh checks against
// the layout before any rank waits for another (parallel_context.cpp, naming
// the launched count). So `meshtrain launch --nproc 8 -- meshtrain train
// tiny-gpt.toml --parallel.tensor=2 --parallel.pipeline=2` runs although
// the file says parallel.workers = 2, which 2 x 2 ways do not divide. With
// no launcher the file and the overrides decide, as for any command.
#include <string>
#include <vector>

#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain::cli {

JobConfig load_launched_job_config(const std::string& path, std::vector<std::string> overrides);

}  // namespace meshtrain::cli
