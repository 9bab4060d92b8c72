#pragma once
#include <cstring>
#include <optional>

#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/device_array.hpp"

namespace meshtrain {

// A buffer that kernels use where they run (kernel()), with the host copy
// that host code reads and writes (host()): the host-staged path's buffers
// (docs/gpu.md: ZeRO's parameter shards and gathered units; a
// router's logits). On the CPU the two are one buffer and
// the moves do nothing; off it, download() and upload() copy a range
// between them.
class StagedBuffer {
 public:
  explicit StagedBuffer(MemoryKind kind) : host_(kind) {}

  // count elements on each side (contents unspecified). device: where
  // kernel() lives, null for the host.
  void ensure(DeviceAllocator* device, size_t count) {
    host_.ensure(count);
    if (!device) return;
    if (!device_) device_.emplace(*device, host_.kind());
    device_->ensure(count);
  }
  // Both sides zero-filled.
  void resize(DeviceAllocator* device, size_t count) {
    ensure(device, count);
    host_.zero();
    if (device_) device_->zero();
  }
  size_t size() const { return host_.size(); }
  float* host() { return host_.data(); }
  // For a layer's or a backend's call only: device memory off the CPU.
  float* kernel() { return device_ ? device_->raw() : host_.data(); }
  // Elements [begin, begin + count) of kernel() to host() (waits for the device).
  void download(size_t begin, size_t count) {
    if (device_ && count) device_->memory().download(host_.data() + begin, device_->raw() + begin, count * sizeof(float));
  }
  // Elements [begin, begin + count) of host() to kernel().
  void upload(size_t begin, size_t count) {
    if (device_ && count) device_->memory().upload(device_->raw() + begin, host_.data() + begin, count * sizeof(float));
  }
  // Zeroes elements [begin, begin + count) of kernel().
  void zero_kernel(size_t begin, size_t count) {
    if (!count) return;
    if (device_)
      device_->memory().zero(device_->raw() + begin, count * sizeof(float));
    else
      std::memset(host_.data() + begin, 0, count * sizeof(float));
  }

 private:
  AlignedBuffer<float> host_;
  std::optional<DeviceArray<float>> device_;
};

}  // namespace meshtrain
