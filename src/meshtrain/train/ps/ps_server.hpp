#pragma once
// The parameter-server role of a job (`meshtrain ps-server`): builds the
// model from the config exactly as every other server does (same seed, same
// initial parameters), serves its shard, reports staleness, and, on server 0,
// saves the final parameters and optimizer state as a normal checkpoint
// (`meshtrain eval` and `meshtrain generate` read it) and evaluates them.
//
// Metrics: <training.out_dir>/server-<j>.jsonl gets a record every
// training.log_every pushes (step, lr, live workers, staleness of the pushes
// since the last record) and a final summary (staleness histogram, pushes and
// joins per worker rank).
#include <cstdint>
#include <cstdio>

#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain {

struct PsServerSummary {
  int64_t step = 0;             // pushes this server applied
  double staleness_mean = 0;
  int64_t staleness_max = 0;
  double val_loss = 0;          // server 0: of the final parameters
};

PsServerSummary run_parameter_server(const JobConfig& config, std::FILE* out);

}  // namespace meshtrain
