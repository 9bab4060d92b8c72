// The datasheet peaks the metrics' mfu is taken against.
#include <gtest/gtest.h>

#include "meshtrain/kernels/device_peak.hpp"

namespace meshtrain::kernels {
namespace {

TEST(DevicePeak, KnowsTheGpusByTheirRuntimeNames) {
  EXPECT_EQ(known_peak_tflops("NVIDIA H100 80GB HBM3", Precision::Bf16), 989.4);
  EXPECT_EQ(known_peak_tflops("NVIDIA H100 80GB HBM3", Precision::Fp32), 66.9);
  EXPECT_EQ(known_peak_tflops("NVIDIA H200", Precision::Bf16), 989.4);
  EXPECT_EQ(known_peak_tflops("NVIDIA H100 PCIe", Precision::Bf16), 756.0);  // before the SXM row
  EXPECT_EQ(known_peak_tflops("NVIDIA H100 NVL", Precision::Bf16), 835.0);
  EXPECT_EQ(known_peak_tflops("NVIDIA A100-SXM4-80GB", Precision::Bf16), 312.0);
}

TEST(DevicePeak, AnUnknownDeviceHasNone) {
  EXPECT_EQ(known_peak_tflops("NVIDIA GeForce RTX 4090", Precision::Bf16), 0.0);
  EXPECT_EQ(known_peak_tflops("", Precision::Fp32), 0.0);
}

}  // namespace
}  // namespace meshtrain::kernels
