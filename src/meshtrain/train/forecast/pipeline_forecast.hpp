#pragma once
// The pipeline stages of `meshtrain plan --config` (job_forecast.hpp), from a
// probe of every stage's pieces (one tensor rank's shards under tensor
// parallelism, one expert rank's experts under expert parallelism computing
// the busiest expert rank's rows, their collectives left out):
//   memory    per stage: its parameters, gradients and optimizer state by
//             ZeRO's formulas over the data ways; activations measured for
//             one activation slot and for two (so a slot's share and what
//             every slot shares are known), times the slots the schedule
//             takes on that rank (executor.hpp's slots_needed)
//   compute   each stage's forward, backward (input) and weight times per
//             micro-batch and chunk, measured with every worker of the job
//             running at once (they share this host's caches and memory
//             bandwidth; the stage's slowest worker counts), then the
//             schedule simulated with each rank's own times
//             (validator.hpp): the step's compute, its bubble included.
//             With more workers' threads than cores the pieces are timed
//             in CPU time, and the step's compute is at least all workers'
//             CPU time over the cores (a stage in its bubble leaves its
//             core to the others), and each update takes the cores' share
//             of all of them. Then the schedule again with each message
//             between stages on the link for its transfer time (one after
//             another on a link, overlapping the ranks' compute): what the
//             sends add to the step; the slowest stage's update
#include <cstddef>
#include <memory>
#include <vector>

#include "meshtrain/nn/model.hpp"
#include "meshtrain/train/config/job_config.hpp"
#include "meshtrain/train/engine/memory_budget.hpp"

namespace meshtrain {

struct StageForecast {
  int stage = 0;
  size_t parameters = 0;  // this stage's elements (the tied wte copy included)
  MemoryPrediction model_state;
  size_t activations = 0;
  int slots = 0;  // activation slots the schedule takes (the largest chunk's)
  double forward_s = 0, backward_s = 0, weight_s = 0;  // per micro-batch and chunk, all workers running
  double update_s = 0;
};

struct PipelineProbe {
  std::vector<StageForecast> stages;
  std::vector<std::unique_ptr<Model>> models;  // [stage]: for the data-parallel terms
  double compute_s = 0;        // the simulated schedule with the measured times, or the work bound
  double alone_compute_s = 0;  // the same with each stage measured alone
  double bubble = 0;           // of the simulated schedule
  double exposed_sends_s = 0;  // what the messages between stages add to the simulated schedule
  size_t data = 0;             // batch buffers
};

// `workers` = data x tensor x pipeline ways, `threads` per worker;
// `transfer_s`: one activation's (or gradient's) time between stages. The
// stages run on `device`; off the CPU every worker has a device of its
// own, so the stages are timed alone (nothing to contend for) and the
// host waits for the device before each reading of the clock.
PipelineProbe probe_pipeline(const JobConfig& config, int workers, int data_ways, int threads, int steps,
                             double transfer_s, const Device& device);

}  // namespace meshtrain
