// StagedBuffer (core/staged_buffer.hpp): the host-staged path's buffers on the guarded
// device, whose memory faults on any host access outside the allocator's
// copies. kernel() is the device's memory and host() its host copy; only
// the ranges asked for cross, and on the CPU the two are one buffer.
#include <gtest/gtest.h>

#include <vector>

#include "meshtrain/kernels/guarded_backend.hpp"
#include "meshtrain/core/staged_buffer.hpp"

namespace meshtrain {
namespace {

std::vector<float> kernel_values(StagedBuffer& b, DeviceAllocator& memory) {
  std::vector<float> out(b.size());
  memory.download(out.data(), b.kernel(), out.size() * sizeof(float));
  return out;
}

TEST(StagedBuffer, OnADeviceOnlyTheRangesAskedForCross) {
  DeviceAllocator& memory = kernels::guarded_backend().allocator();
  StagedBuffer b(MemoryKind::Communication);
  b.resize(&memory, 6);
  EXPECT_NE(b.kernel(), b.host());
  EXPECT_EQ(kernel_values(b, memory), std::vector<float>(6, 0.0f));
  for (int i = 0; i < 6; ++i) b.host()[i] = float(i + 1);
  b.upload(2, 3);  // elements 2, 3, 4
  EXPECT_EQ(kernel_values(b, memory), (std::vector<float>{0, 0, 3, 4, 5, 0}));
  const std::vector<float> sevens(6, 7.0f);
  memory.upload(b.kernel(), sevens.data(), sevens.size() * sizeof(float));
  b.download(4, 2);
  EXPECT_EQ(std::vector<float>(b.host(), b.host() + 6), (std::vector<float>{1, 2, 3, 4, 7, 7}));
  b.zero_kernel(1, 2);
  EXPECT_EQ(kernel_values(b, memory), (std::vector<float>{7, 0, 0, 7, 7, 7}));
  b.ensure(&memory, 4);  // smaller: no reallocation, both sides keep their memory
  EXPECT_EQ(b.size(), 4u);
}

TEST(StagedBuffer, OnTheCpuBothSidesAreOneBuffer) {
  StagedBuffer b(MemoryKind::Gradients);
  b.resize(nullptr, 3);
  EXPECT_EQ(b.kernel(), b.host());
  b.host()[1] = 5.0f;
  b.upload(0, 3);
  b.download(0, 3);  // nothing to move
  EXPECT_EQ(b.kernel()[1], 5.0f);
  b.zero_kernel(1, 1);
  EXPECT_EQ(b.host()[1], 0.0f);
}

}  // namespace
}  // namespace meshtrain
