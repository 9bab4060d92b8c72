#pragma once
// The device a training process runs on (training.device), checked before
// anything is built or read: a job that asks for a GPU it cannot use stops
// here with the reason (DeviceError, exit status 3), never after its data
// and model were loaded.
#include <string>

#include "meshtrain/core/device.hpp"
#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain {

// A job's device once opened, and what the CUDA runtime said of a GPU (its
// name decides the datasheet peak of mfu), so nothing asks it again.
struct OpenedDevice {
  Device device;
  std::string gpu_name;  // "NVIDIA H100 80GB HBM3"; empty off a GPU
};

// "cpu" costs nothing. "cuda" takes the launcher's local rank (LOCAL_RANK,
// SLURM_LOCALID, ...), "cuda:N" GPU N, and asks the CUDA runtime for it.
// "cpu-guarded" (kernels/guarded_backend.hpp) costs nothing either.
OpenedDevice open_training_device(const TrainingSection& training);

// `device` for this job: off the CPU a model trains with every optimizer,
// in one process or in several with data (every ZeRO stage, the Reduction
// Server, parameter servers), tensor, pipeline and expert parallelism, their
// collectives over NCCL or staged through host memory (docs/gpu.md).
// parallel.device_collectives = "nccl" off a GPU or for parameter servers:
// ConfigError (exit status 3) saying why.
const Device& check_device_job(const Device& device, const JobConfig& config);

// The peak TFLOP/s the metrics' mfu divides by: training.peak_tflops when
// set, else a GPU's datasheet figure at training.precision
// (kernels/device_peak.hpp); 0 (no mfu) where neither is known.
double device_peak_tflops(const OpenedDevice& opened, const TrainingSection& training);

}  // namespace meshtrain
