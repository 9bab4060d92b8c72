#include "meshtrain/kernels/cuda/cuda_check.hpp"

#include "meshtrain/core/error.hpp"

namespace meshtrain::kernels::cuda {

std::string cuda_error_text(cudaError_t status) {
  return std::string(cudaGetErrorName(status)) + " (" + std::to_string(int(status)) + "): " +
         cudaGetErrorString(status);
}

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  throw DeviceError(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                    cuda_error_text(status));
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw DeviceError(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                    cublasLtGetStatusName(status) + " (" + std::to_string(int(status)) +
                    "): " + cublasLtGetStatusString(status));
}

}  // namespace meshtrain::kernels::cuda
