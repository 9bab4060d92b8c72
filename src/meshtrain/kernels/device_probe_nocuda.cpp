// What a build without the CUDA toolkit (MESHTRAIN_CUDA=off, or auto where
// nvcc was not found) answers for a GPU: the probe and the backend fail with
// that reason.
#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/kernels/device_probe.hpp"

namespace meshtrain::kernels {
namespace {

[[noreturn]] void no_cuda_build() {
  throw DeviceError(
      "this meshtrain was built without CUDA (configure found no CUDA toolkit, or MESHTRAIN_CUDA=off): "
      "rebuild with the toolkit installed (docs/gpu.md), or set training.device = \"cpu\"");
}

}  // namespace

bool cuda_built() { return false; }
int cuda_device_count() { no_cuda_build(); }
CudaDeviceInfo open_cuda_device(const Device&) { no_cuda_build(); }
Backend& cuda_backend(int) { no_cuda_build(); }
std::string describe(const CudaDeviceInfo& info) { return "cuda:" + std::to_string(info.index); }

}  // namespace meshtrain::kernels
