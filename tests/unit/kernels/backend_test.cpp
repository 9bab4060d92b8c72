#include "meshtrain/kernels/backend.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/device_probe.hpp"
#include "meshtrain/kernels/layernorm.hpp"

namespace meshtrain::kernels {
namespace {

TEST(Backend, TheCpuDeviceGetsTheCpuBackend) {
  Backend& b = backend_for(Device{});
  EXPECT_EQ(&b, &cpu_backend());
  EXPECT_TRUE(b.device().is_cpu());
  EXPECT_EQ(b.allocator().name(), "cpu");
}

// The CPU backend is the CPU kernels: the same bits as calling them.
TEST(Backend, CpuLayernormIsTheKernelBitForBit) {
  const int64_t N = 7, C = 33;
  std::vector<float> x(N * C), w(C), bias(C);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 13) * 0.37f - 2.0f;
  for (int64_t c = 0; c < C; ++c) w[c] = 1.0f + 0.01f * float(c), bias[c] = -0.02f * float(c);
  std::vector<float> out1(N * C), mean1(N), rstd1(N), out2(N * C), mean2(N), rstd2(N);
  layernorm_forward(out1.data(), mean1.data(), rstd1.data(), x.data(), w.data(), bias.data(), N, C);
  cpu_backend().layernorm_forward(out2.data(), mean2.data(), rstd2.data(), x.data(), w.data(), bias.data(), N, C);
  EXPECT_EQ(std::memcmp(out1.data(), out2.data(), out1.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(rstd1.data(), rstd2.data(), rstd1.size() * sizeof(float)), 0);
}

// Without a usable GPU (or without a CUDA build) a GPU's backend is a
// DeviceError with the probe's reason, never a CPU stand-in.
TEST(Backend, AGpuWithoutOneIsADeviceError) {
  try {
    cuda_device_count();
    GTEST_SKIP() << "this machine has a GPU";
  } catch (const DeviceError&) {
  }
  try {
    backend_for(Device{DeviceKind::Cuda, 0});
    FAIL() << "a GPU backend without a GPU";
  } catch (const DeviceError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find("no usable GPU") != std::string::npos || what.find("without CUDA") != std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace meshtrain::kernels
