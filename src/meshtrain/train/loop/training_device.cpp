#include "meshtrain/train/loop/training_device.hpp"

#include "meshtrain/comm/bootstrap/launch_env.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/device_probe.hpp"

namespace meshtrain {

Device open_training_device(const TrainingSection& training) {
  const DeviceRequest request = parse_device(training.device);
  if (request.kind == DeviceKind::Cpu) return {};
  const Device device = resolve_device(request, request.index_given ? 0 : comm::read_launch_env().local_rank);
  const kernels::CudaDeviceInfo info = kernels::open_cuda_device(device);
  // The GPU answers, its kernels are built (kernels/cuda/), but the layers do
  // not run on them yet: say so rather than train on the CPU behind the
  // user's back.
  throw DeviceError("training.device = \"" + training.device + "\": " + kernels::describe(info) +
                    " is usable, but this meshtrain cannot train on a GPU yet: its CUDA kernels are built and "
                    "tested, the model does not run on them (docs/gpu.md); set training.device = \"cpu\"");
}

}  // namespace meshtrain
