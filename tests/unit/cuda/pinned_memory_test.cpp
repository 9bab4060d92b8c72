// A GPU's staging memory (kernels/cuda/cuda_memory.hpp's PinnedHostMemory,
// CudaAllocator::staging_memory): page-locked host memory, as the CUDA
// runtime reports it, that the host indexes and that device copies reach
// both ways bit for bit; counted in the host's tracker, not the device's.
// And the device memory's pool, which keeps what is freed.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "gpu_test_util.hpp"
#include "kernel_compare.hpp"
#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/device_buffer.hpp"
#include "meshtrain/kernels/cuda/cuda_memory.hpp"

namespace meshtrain::kernels::cuda {
namespace {

TEST(CudaPinnedMemory, IsPageLockedHostMemoryThatCopiesBothWays) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator device;
  DeviceAllocator* staging = device.staging_memory();
  ASSERT_NE(staging, nullptr);
  const size_t host_before = MemoryTracker::global().current(MemoryKind::Communication);
  const size_t device_before = MemoryTracker::device().current(MemoryKind::Communication);
  AlignedBuffer<float> pinned(*staging, 4099, MemoryKind::Communication);
  EXPECT_EQ(MemoryTracker::global().current(MemoryKind::Communication), host_before + 4099 * sizeof(float));
  EXPECT_EQ(MemoryTracker::device().current(MemoryKind::Communication), device_before);

  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, pinned.data()), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost) << "not page-locked";

  const std::vector<float> values = test::random_floats(4099, 61);
  std::memcpy(pinned.data(), values.data(), values.size() * sizeof(float));  // the host indexes it
  DeviceBuffer<float> on_device(device, 4099, MemoryKind::Other);
  device.upload(on_device.ptr().raw(), pinned.data(), 4099 * sizeof(float));
  pinned.zero();
  device.download(pinned.data(), on_device.ptr().raw(), 4099 * sizeof(float));
  test::expect_same_bits(std::vector<float>(pinned.data(), pinned.data() + 4099), values, "round trip");
}

// Freed device memory stays in the default pool for the next step's
// buffers rather than going back to the driver at each synchronisation.
TEST(CudaAllocator, KeepsFreedMemoryInTheDevicesPool) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator device;
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
  uint64_t threshold = 0;
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold), cudaSuccess);
  EXPECT_EQ(threshold, UINT64_MAX);
  {
    DeviceBuffer<float> step(device, size_t(16) << 20, MemoryKind::Other);  // 64 MiB, freed below
  }
  ASSERT_EQ(cudaStreamSynchronize(device.stream()), cudaSuccess);
  uint64_t reserved = 0;
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved), cudaSuccess);
  EXPECT_GE(reserved, uint64_t(64) << 20) << "the freed buffer's memory went back to the driver";
}

}  // namespace
}  // namespace meshtrain::kernels::cuda
