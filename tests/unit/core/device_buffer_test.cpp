#include "meshtrain/core/device_buffer.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "meshtrain/core/error.hpp"

namespace meshtrain {
namespace {

// Device memory played by host memory: what DeviceBuffer asks of a
// device's allocator, counted, so the buffer's own logic is tested here.
class HostAllocator final : public DeviceAllocator {
 public:
  void* allocate(size_t bytes) override {
    ++allocations;
    return std::malloc(bytes);
  }
  void release(void* p) noexcept override {
    ++releases;
    std::free(p);
  }
  void zero(void* p, size_t bytes) override { std::memset(p, 0, bytes); }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  std::string name() const override { return "host"; }
  int allocations = 0, releases = 0;
};

TEST(DeviceBuffer, UploadThenDownloadGivesTheValuesBack) {
  HostAllocator alloc;
  DeviceBuffer<float> buf(alloc, 5, MemoryKind::Parameters);
  const std::vector<float> in = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f};
  buf.upload(in);
  std::vector<float> out(5, -1.0f);
  buf.download(out);
  EXPECT_EQ(out, in);
  buf.zero();
  buf.download(out);
  EXPECT_EQ(out, std::vector<float>(5, 0.0f));
}

TEST(DeviceBuffer, CountsItsBytesInTheDeviceTrackerOnly) {
  HostAllocator alloc;
  const size_t device_before = MemoryTracker::device().current(MemoryKind::Gradients);
  const size_t host_before = MemoryTracker::global().current(MemoryKind::Gradients);
  {
    DeviceBuffer<float> buf(alloc, 1000, MemoryKind::Gradients);
    EXPECT_EQ(MemoryTracker::device().current(MemoryKind::Gradients), device_before + 4000);
    DeviceBuffer<float> moved = std::move(buf);
    EXPECT_EQ(MemoryTracker::device().current(MemoryKind::Gradients), device_before + 4000);
    EXPECT_EQ(buf.size(), 0u);
    EXPECT_EQ(moved.size(), 1000u);
  }
  EXPECT_EQ(MemoryTracker::device().current(MemoryKind::Gradients), device_before);
  EXPECT_EQ(MemoryTracker::global().current(MemoryKind::Gradients), host_before);
  EXPECT_EQ(alloc.allocations, 1);
  EXPECT_EQ(alloc.releases, 1);
}

TEST(DeviceBuffer, ACopyLargerThanTheBufferIsAnError) {
  HostAllocator alloc;
  DeviceBuffer<float> buf(alloc, 2, MemoryKind::Other);
  const std::vector<float> three(3, 1.0f);
  EXPECT_THROW(buf.upload(three), Error);
  std::vector<float> out(3);
  EXPECT_THROW(buf.download(out), Error);
  // A shorter copy touches only the front.
  buf.upload(std::vector<float>{4.0f, 5.0f});
  buf.upload(std::vector<float>{6.0f});
  std::vector<float> two(2);
  buf.download(two);
  EXPECT_EQ(two, (std::vector<float>{6.0f, 5.0f}));
}

TEST(DeviceBuffer, EmptyBuffersAllocateNothing) {
  HostAllocator alloc;
  DeviceBuffer<float> buf(alloc, 0, MemoryKind::Other);
  buf.zero();
  buf.upload(std::vector<float>{});
  EXPECT_FALSE(buf.ptr());
  EXPECT_EQ(alloc.allocations, 0);
}

}  // namespace
}  // namespace meshtrain
