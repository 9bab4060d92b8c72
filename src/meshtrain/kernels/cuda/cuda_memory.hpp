#pragma once
// A GPU's memory as a DeviceAllocator (core/device_buffer.hpp): allocations
// from the stream-ordered pool, fills and copies issued on one stream, so
// they order with the kernels on it; upload and download wait for their copy.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>

#include "meshtrain/core/device_buffer.hpp"

namespace meshtrain::kernels::cuda {

// Page-locked host memory (cudaMallocHost): the staging memory of a GPU
// (DeviceAllocator::staging_memory), which its copies reach by DMA without
// the driver's bounce buffer. Host memory, so the host indexes it and its
// bytes count in the host's tracker; its "uploads" and "downloads" are
// host copies.
class PinnedHostMemory final : public DeviceAllocator {
 public:
  void* allocate(size_t bytes) override;
  void release(void* p) noexcept override;
  void zero(void* p, size_t bytes) override;
  void upload(void* dst, const void* src, size_t bytes) override;
  void download(void* dst, const void* src, size_t bytes) override;
  std::string name() const override { return "pinned host memory"; }
  MemoryTracker& tracker() override { return MemoryTracker::global(); }
};

class CudaAllocator final : public DeviceAllocator {
 public:
  // The current device's memory, ordered on `stream` (0: the legacy default
  // stream), from its default pool, which keeps freed memory for reuse.
  explicit CudaAllocator(cudaStream_t stream = nullptr);
  void* allocate(size_t bytes) override;
  void release(void* p) noexcept override;
  void zero(void* p, size_t bytes) override;
  void upload(void* device_dst, const void* host_src, size_t bytes) override;
  void download(void* host_dst, const void* device_src, size_t bytes) override;
  std::string name() const override;
  DeviceAllocator* staging_memory() override { return &staging_; }
  cudaStream_t stream() const { return stream_; }
  // Downloads so far: every wait of the host for the device's values
  // (Backend::host_syncs).
  int64_t downloads() const { return downloads_.load(); }

 private:
  cudaStream_t stream_;
  std::atomic<int64_t> downloads_{0};
  int device_ = 0;
  cudaMemPool_t pool_ = nullptr;  // the device's default pool, which allocate() draws from
  PinnedHostMemory staging_;
};

}  // namespace meshtrain::kernels::cuda
