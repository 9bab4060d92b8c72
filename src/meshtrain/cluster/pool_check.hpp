#pragma once
// Whether a job's worker pools fit its config, checked before anything
// starts: pool 2 replicas with no role in the config, several workers with
// no data parallelism, a parameter-server or Reduction Server job without
// servers. `run` derives its pools from the config; `submit` reads them from
// a CustomJob spec, where they can disagree.
#include <string>

#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain {

struct PoolCounts {
  int workers = 1;     // pool 0 + pool 1: every training process
  int servers = 0;     // pool 2: parameter servers or reducers
  int evaluators = 0;  // pool 3
};

// Throws ConfigError starting with `where` when the pools do not fit.
void check_pools_fit_config(const PoolCounts& pools, const ParallelSection& parallel, const std::string& where);

}  // namespace meshtrain
