#pragma once
// The training loop of one process: builds the model, data, optimizer and
// schedule from a JobConfig, optionally resumes from the newest complete
// checkpoint, and runs forward, backward, clipping and the update per step,
// with metrics, progress, evaluation and checkpoints on their cadences.
#include <cstdint>
#include <cstdio>

#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain {

struct TrainOptions {
  bool resume = false;        // continue from the newest complete checkpoint, if any
  int64_t stop_at_step = 0;   // >0: checkpoint and stop after this step (the schedule still spans training.steps)
  std::FILE* out = stdout;    // progress and log lines
  bool interactive = false;   // redraw a status line (out is a terminal)
  bool memory_report = false; // print peak memory per kind beside ZeRO's prediction at the end
};

struct TrainSummary {
  int64_t first_step = 0;  // step the run started at (0, or the resumed step)
  int64_t last_step = 0;   // steps done when it stopped
  double final_loss = 0;
  double val_loss = 0;
  double val_accuracy = 0;
  int stopped_by = 0;      // the signal (SIGTERM, SIGUSR1) that stopped the run after a checkpoint of last_step; 0: none
};

// With parallel.data = "parameter_server" this process is one asynchronous
// worker (ps_worker.hpp); otherwise a synchronous worker, alone or one of a
// job's mesh (parallel/parallel_context.hpp).
TrainSummary train(const JobConfig& config, const TrainOptions& options);

}  // namespace meshtrain
