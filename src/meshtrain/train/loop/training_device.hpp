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
// "cpu-guarded" (kernels/guarded_backend.hpp) costs nothing either.
Device open_training_device(const TrainingSection& training);

// `device` for this job of `workers` processes: off the CPU one process
// trains a dense model with AdamW (collectives on device memory, mixtures of
// experts and the parameter servers come with part 2 of the GPU path,
// docs/gpu.md); ConfigError (exit status 3) naming what stands in the way.
const Device& check_device_job(const Device& device, const JobConfig& config, int64_t workers);

// The peak TFLOP/s the metrics' mfu divides by: training.peak_tflops when
// set, else a GPU's datasheet figure at training.precision
// (kernels/device_peak.hpp); 0 (no mfu) where neither is known.
double device_peak_tflops(const Device& device, const TrainingSection& training);

}  // namespace meshtrain
