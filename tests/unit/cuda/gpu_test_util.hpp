#pragma once
// Shared by the GPU tests: a test that needs a GPU starts with
// MESHTRAIN_REQUIRE_GPU(); where there is none it is skipped with the
// probe's reason (ctest reports it as skipped, never passed), and
// MESHTRAIN_REQUIRE_GPU_TESTS=1 (scripts/gpu-check.sh) turns that skip into
// a failure, so a GPU machine cannot pass by skipping.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "meshtrain/core/device_buffer.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/cuda/cuda_memory.hpp"
#include "meshtrain/kernels/device_probe.hpp"

namespace meshtrain::test {

// "" where GPU 0 is usable (and made current), else why not.
inline std::string gpu_unavailable_reason() {
  try {
    kernels::open_cuda_device(Device{DeviceKind::Cuda, 0});
    return "";
  } catch (const DeviceError& e) {
    return e.what();
  }
}

inline bool gpu_tests_required() {
  const char* v = std::getenv("MESHTRAIN_REQUIRE_GPU_TESTS");
  return v && std::string(v) == "1";
}

// Host data on the GPU and back, for the tests.
template <class T>
DeviceBuffer<T> to_device(kernels::cuda::CudaAllocator& alloc, const std::vector<T>& host) {
  DeviceBuffer<T> d(alloc, host.size(), MemoryKind::Other);
  d.upload(host);
  return d;
}
template <class T>
std::vector<T> to_host(const DeviceBuffer<T>& d) {
  std::vector<T> host(d.size());
  d.download(host);
  return host;
}
// A buffer filled with NaN bytes (0xff), so that an element the kernel
// forgot to write shows.
template <class T>
DeviceBuffer<T> poisoned(kernels::cuda::CudaAllocator& alloc, size_t n) {
  std::vector<T> host(n);
  std::memset(static_cast<void*>(host.data()), 0xff, n * sizeof(T));
  return to_device(alloc, host);
}

inline std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace meshtrain::test

#define MESHTRAIN_REQUIRE_GPU()                                                             \
  do {                                                                                      \
    const std::string meshtrain_reason_ = ::meshtrain::test::gpu_unavailable_reason();      \
    if (!meshtrain_reason_.empty()) {                                                       \
      if (::meshtrain::test::gpu_tests_required()) FAIL() << "no GPU: " << meshtrain_reason_; \
      GTEST_SKIP() << "no GPU: " << meshtrain_reason_;                                      \
    }                                                                                       \
  } while (0)
