#pragma once
// The host-staged path (docs/gpu.md): values in a device's memory reach a
// collective of the host's as a host copy, downloaded before it runs and
// uploaded after, so the host's collectives (shm, TCP, MPI) serve tensors
// that live on a device. Each move waits for the device.
#include <span>

#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/device_buffer.hpp"
#include "meshtrain/core/function_ref.hpp"

namespace meshtrain::parallel {

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

}  // namespace meshtrain::parallel
