#pragma once
// The host-staged path (docs/gpu.md): values in a device's memory reach a
// collective of the host's as a host copy, downloaded before it runs and
// uploaded after, so the host's collectives (shm, TCP, MPI) serve tensors
// that live on a device. Each move waits for the device.
#include <cstring>
#include <optional>
#include <span>

#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/device_array.hpp"
#include "meshtrain/core/device_buffer.hpp"
#include "meshtrain/core/function_ref.hpp"
#include "meshtrain/core/param_store.hpp"

namespace meshtrain::parallel {

// The memory a store's collectives stage through: its device's, or null
// on the CPU, where there is nothing to stage.
DeviceAllocator* staging_memory(const ParamStore& store);

// Runs `collective` in place on `values`: on themselves when `device` is
// null (host memory), else on a copy in `scratch`, written back after.
inline void on_host(DeviceAllocator* device, std::span<float> values, AlignedBuffer<float>& scratch,
                    FunctionRef<void(std::span<float>)> collective) {
  if (!device) return collective(values);
  scratch.ensure(values.size());
  const std::span<float> host(scratch.data(), values.size());
  device->download(host.data(), values.data(), values.size_bytes());
  collective(host);
  device->upload(values.data(), host.data(), values.size_bytes());
}

// A buffer that the layers or the optimizer use where the store's kernels
// run (kernel()), with the host copy the host's collectives read and write
// (host()). On the CPU the two are one buffer and the moves do nothing; off
// it, download() and upload() copy a range between them (ZeRO's gradient
// staging, gathered units and shards).
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

}  // namespace meshtrain::parallel
