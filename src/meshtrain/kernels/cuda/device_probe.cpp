// The device probe of a CUDA build. The runtime is linked statically and
// libcuda never is, so this binary starts where no driver is installed;
// cudaGetDeviceCount then answers, and its status says why there is no GPU.
#include <cstdio>
#include <cstring>

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/cuda/cuda_check.hpp"
#include "meshtrain/kernels/device_probe.hpp"

namespace meshtrain::kernels {
namespace {

// Why cudaGetDeviceCount found no GPU, in words a user can act on.
std::string no_gpu_reason(cudaError_t status) {
  switch (status) {
    case cudaErrorInsufficientDriver:
      return "no NVIDIA driver on this machine, or one older than the CUDA runtime meshtrain was built with";
    case cudaErrorNoDevice:
      return "the NVIDIA driver sees no GPU (check CUDA_VISIBLE_DEVICES and nvidia-smi)";
    case cudaErrorInitializationError:
      return "the CUDA runtime could not initialise the driver";
    case cudaErrorStubLibrary:
      return "the CUDA driver found is a stub library, not a real driver";
    default:
      return "CUDA could not start";
  }
}

}  // namespace

bool cuda_built() { return true; }

int cuda_device_count() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess)
    throw DeviceError("no usable GPU: " + no_gpu_reason(status) + " [" + cuda::cuda_error_text(status) + "]");
  if (count == 0) throw DeviceError("no usable GPU: the CUDA runtime counts 0 devices");
  return count;
}

CudaDeviceInfo open_cuda_device(const Device& device) {
  const int count = cuda_device_count();
  if (device.index >= count)
    throw DeviceError("training.device asks for GPU " + std::to_string(device.index) + " (" + device_name(device) +
                      ", from \"cuda:N\" or LOCAL_RANK) but this process sees " + std::to_string(count) +
                      " GPU(s)");
  MESHTRAIN_CUDA_CHECK(cudaSetDevice(device.index));
  cudaDeviceProp prop{};
  MESHTRAIN_CUDA_CHECK(cudaGetDeviceProperties(&prop, device.index));
  CudaDeviceInfo info;
  info.index = device.index;
  info.name = prop.name;
  info.major = prop.major;
  info.minor = prop.minor;
  info.total_bytes = prop.totalGlobalMem;
  info.multiprocessors = prop.multiProcessorCount;
  std::memcpy(info.uuid.data(), prop.uuid.bytes, info.uuid.size());
  MESHTRAIN_CUDA_CHECK(cudaDriverGetVersion(&info.driver_version));
  MESHTRAIN_CUDA_CHECK(cudaRuntimeGetVersion(&info.runtime_version));
  if (info.major < 9)
    throw DeviceError(describe(info) + ": meshtrain's CUDA path is built for sm_90 (H100/H200) and newer");
  return info;
}

std::string describe(const CudaDeviceInfo& info) {
  char line[256];
  std::snprintf(line, sizeof line, "cuda:%d %s, sm_%d%d, %.1f GiB, %d SMs, driver %d.%d, runtime %d.%d", info.index,
                info.name.c_str(), info.major, info.minor, double(info.total_bytes) / (1 << 30),
                info.multiprocessors, info.driver_version / 1000, info.driver_version % 1000 / 10,
                info.runtime_version / 1000, info.runtime_version % 1000 / 10);
  return line;
}

}  // namespace meshtrain::kernels
