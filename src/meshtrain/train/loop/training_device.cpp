#include "meshtrain/train/loop/training_device.hpp"

#include "meshtrain/comm/bootstrap/launch_env.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/device_peak.hpp"
#include "meshtrain/kernels/device_probe.hpp"

namespace meshtrain {

OpenedDevice open_training_device(const TrainingSection& training) {
  const DeviceRequest request = parse_device(training.device);
  if (request.kind != DeviceKind::Cuda) return {resolve_device(request, 0), ""};
  const Device device = resolve_device(request, request.index_given ? 0 : comm::read_launch_env().local_rank);
  return {device, kernels::open_cuda_device(device).name};  // DeviceError naming why it cannot be used
}

const Device& check_device_job(const Device& device, const JobConfig& config) {
  if (config.parallel.device_collectives == comm::DeviceCollectivesKind::Nccl &&
      config.parallel.data == DataParallelism::ParameterServer)
    throw ConfigError("parallel.device_collectives = \"nccl\" carries the synchronous strategies' collectives, but "
                      "parallel.data = \"parameter_server\": its servers are host processes, reached through host "
                      "memory; set parallel.device_collectives = \"auto\"");
  if (config.parallel.device_collectives == comm::DeviceCollectivesKind::Nccl && device.kind != DeviceKind::Cuda)
    throw ConfigError("parallel.device_collectives = \"nccl\" needs workers on GPUs, but training.device = \"" +
                      config.training.device + "\": set training.device = \"cuda\", or "
                      "parallel.device_collectives = \"auto\"");
  return device;
}

double device_peak_tflops(const OpenedDevice& opened, const TrainingSection& training) {
  if (training.peak_tflops > 0) return training.peak_tflops;
  if (opened.device.kind != DeviceKind::Cuda) return 0;
  return kernels::known_peak_tflops(opened.gpu_name, training.precision);
}

}  // namespace meshtrain
