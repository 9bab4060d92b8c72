#pragma once
// Every CUDA runtime and cuBLASLt call's status goes through one check that
// throws DeviceError naming the call, the file and line, and the library's
// own name and text for the status: errors travel up to main (exit 3 before
// training, 1 during it), nothing here exits.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <string>

namespace meshtrain::kernels::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line);

// "cudaErrorNoDevice (100): no CUDA-capable device is detected"
std::string cuda_error_text(cudaError_t status);

}  // namespace meshtrain::kernels::cuda

#define MESHTRAIN_CUDA_CHECK(call)                                                          \
  do {                                                                                      \
    const cudaError_t meshtrain_status_ = (call);                                           \
    if (meshtrain_status_ != cudaSuccess)                                                   \
      ::meshtrain::kernels::cuda::throw_cuda_error(meshtrain_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define MESHTRAIN_CUBLAS_CHECK(call)                                                          \
  do {                                                                                        \
    const cublasStatus_t meshtrain_status_ = (call);                                          \
    if (meshtrain_status_ != CUBLAS_STATUS_SUCCESS)                                           \
      ::meshtrain::kernels::cuda::throw_cublas_error(meshtrain_status_, #call, __FILE__, __LINE__); \
  } while (0)
