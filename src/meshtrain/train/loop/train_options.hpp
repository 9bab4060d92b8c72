#pragma once
// What a training process is asked for beside its job config (the command's
// flags) and what it answers, for every kind of worker: the synchronous
// trainer (trainer.hpp) and a parameter-server worker (ps/ps_worker.hpp).
// A header of its own so that the parameter-server room needs nothing of
// the synchronous trainer's.
#include <cstdint>
#include <cstdio>

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
  // The signal (SIGTERM, SIGUSR1) that stopped the run after a checkpoint of last_step; 0: none.
  int stopped_by = 0;
};

}  // namespace meshtrain
