#pragma once
// Host memory the host may index: a DeviceArray (device_array.hpp) on
// host_memory() (64-byte aligned, huge pages for large arrays, counted
// under its MemoryKind in MemoryTracker::global()) with element access.
// The growth and sharing rules are DeviceArray's: page faults cost ~12 us
// per 4 KiB page on our machines, so ensure() reallocates only to grow, and
// share() lets every block of a model keep its internals in one set of
// buffers (activation recomputation: only the block being recomputed needs
// them).
#include <cstddef>
#include <span>

#include "meshtrain/core/device_array.hpp"
#include "meshtrain/core/host_memory.hpp"

namespace meshtrain {

template <class T>
class AlignedBuffer : public DeviceArray<T> {
 public:
  explicit AlignedBuffer(MemoryKind kind = MemoryKind::Other) : DeviceArray<T>(host_memory(), kind) {}
  AlignedBuffer(size_t count, MemoryKind kind) : AlignedBuffer(kind) { this->resize(count); }
  // count elements of other host memory the host indexes: a device's
  // staging memory (DeviceAllocator::staging_memory, page-locked on a GPU).
  AlignedBuffer(DeviceAllocator& host_indexable, size_t count, MemoryKind kind)
      : DeviceArray<T>(host_indexable, kind) {
    this->resize(count);
  }

  // From now on this buffer is `storage` (nullptr: its own, empty, again).
  void share(AlignedBuffer* storage) { DeviceArray<T>::share(storage); }

  T* data() { return this->raw(); }
  const T* data() const { return this->raw(); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  std::span<T> span() { return {data(), this->size()}; }
  std::span<const T> span() const { return {data(), this->size()}; }
};

}  // namespace meshtrain
