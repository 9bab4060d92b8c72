#pragma once
// Asks the CUDA runtime whether the GPU a job names can be used, before any
// model is built, so that a job without one stops at once with the reason
// (DeviceError: no driver, no GPU, no such GPU, a build without CUDA, or the
// CUDA error met), exit status 3.
#include <array>
#include <cstddef>
#include <string>

#include "meshtrain/core/device.hpp"

namespace meshtrain::kernels {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;                  // "NVIDIA H100 80GB HBM3"
  int major = 0, minor = 0;          // compute capability
  size_t total_bytes = 0;            // device memory
  int multiprocessors = 0;
  int driver_version = 0;            // CUDA version the driver supports, 1000 major + 10 minor
  int runtime_version = 0;           // the CUDA runtime linked in
  std::array<unsigned char, 16> uuid{};  // the GPU's, unique across machines (which workers share one)
};

// Whether this build carries the CUDA path (MESHTRAIN_CUDA at configure time).
bool cuda_built();

// The number of usable GPUs, or a DeviceError saying why there is none.
int cuda_device_count();

// Makes `device` (a Cuda one) this thread's current GPU and describes it;
// a DeviceError names why it cannot be used.
CudaDeviceInfo open_cuda_device(const Device& device);

// One line for logs: "cuda:0 NVIDIA H100 80GB HBM3, sm_90, 79.1 GiB, 132 SMs, driver 13.0, runtime 13.0".
std::string describe(const CudaDeviceInfo& info);

}  // namespace meshtrain::kernels
