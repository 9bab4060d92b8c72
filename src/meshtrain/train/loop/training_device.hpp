#pragma once
// The device a training process runs on (training.device), checked before
// anything is built or read: a job that asks for a GPU it cannot use stops
// here with the reason (DeviceError, exit status 3), never after its data
// and model were loaded.
#include "meshtrain/core/device.hpp"
#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain {

// "cpu" costs nothing. "cuda" takes the launcher's local rank (LOCAL_RANK,
// SLURM_LOCALID, ...), "cuda:N" GPU N, and asks the CUDA runtime for it.
Device open_training_device(const TrainingSection& training);

}  // namespace meshtrain
