#pragma once
// The training loop of one synchronous worker, alone or one of a job's mesh
// (parallel/parallel_context.hpp): builds the model, data, optimizer and
// schedule from a JobConfig, optionally resumes from the newest complete
// checkpoint, and runs forward, backward, clipping and the update per step,
// with metrics, progress, evaluation and checkpoints on their cadences.
#include "meshtrain/train/config/job_config.hpp"
#include "meshtrain/train/loop/train_options.hpp"
#include "meshtrain/train/loop/training_device.hpp"

namespace meshtrain {

// On `device` (training_device.hpp, already opened). Opens this worker's
// flight-recorder ring and watches the stop signals of a preemption first.
TrainSummary train_synchronous(const JobConfig& config, const TrainOptions& options, const OpenedDevice& opened);

}  // namespace meshtrain
