#include "meshtrain/kernels/cuda/cuda_memory.hpp"

#include <cstdint>
#include <cstring>

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/cuda/cuda_check.hpp"

namespace meshtrain::kernels::cuda {

// The device's default pool keeps what is freed instead of handing it back
// to the driver at every synchronisation (its default threshold is 0, and
// each download synchronises): the buffers that live one step (ZeRO's
// gathers, scratch) would otherwise be mapped again every step. An
// allocation that fails gives the pool's memory back and tries once more.
CudaAllocator::CudaAllocator(cudaStream_t stream) : stream_(stream) {
  MESHTRAIN_CUDA_CHECK(cudaGetDevice(&device_));
  MESHTRAIN_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool_, device_));
  uint64_t keep_all = UINT64_MAX;
  MESHTRAIN_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep_all));
}

void* CudaAllocator::allocate(size_t bytes) {
  void* p = nullptr;
  cudaError_t status = cudaMallocAsync(&p, bytes, stream_);
  if (status == cudaErrorMemoryAllocation) {
    // What the pool kept may be the memory that is missing: once given back
    // to the driver, it can serve this size (or NCCL's own allocations).
    (void)cudaGetLastError();
    MESHTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_));
    MESHTRAIN_CUDA_CHECK(cudaMemPoolTrimTo(pool_, 0));
    status = cudaMallocAsync(&p, bytes, stream_);
  }
  if (status == cudaErrorMemoryAllocation)
    throw DeviceError("out of GPU memory on " + name() + " allocating " + std::to_string(bytes >> 20) + " MiB");
  MESHTRAIN_CUDA_CHECK(status);
  return p;
}

void CudaAllocator::release(void* p) noexcept { cudaFreeAsync(p, stream_); }

void CudaAllocator::zero(void* p, size_t bytes) { MESHTRAIN_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_)); }

void CudaAllocator::upload(void* device_dst, const void* host_src, size_t bytes) {
  MESHTRAIN_CUDA_CHECK(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  MESHTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaAllocator::download(void* host_dst, const void* device_src, size_t bytes) {
  MESHTRAIN_CUDA_CHECK(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, stream_));
  MESHTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_));
  ++downloads_;
}

void* PinnedHostMemory::allocate(size_t bytes) {
  void* p = nullptr;
  const cudaError_t status = cudaMallocHost(&p, bytes ? bytes : 1);
  if (status == cudaErrorMemoryAllocation)
    throw DeviceError("out of page-locked host memory allocating " + std::to_string(bytes >> 20) + " MiB");
  MESHTRAIN_CUDA_CHECK(status);
  return p;
}

void PinnedHostMemory::release(void* p) noexcept { cudaFreeHost(p); }
void PinnedHostMemory::zero(void* p, size_t bytes) { std::memset(p, 0, bytes); }
void PinnedHostMemory::upload(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void PinnedHostMemory::download(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

std::string CudaAllocator::name() const { return "cuda:" + std::to_string(device_); }

}  // namespace meshtrain::kernels::cuda
