#pragma once
// A layer's activations: a growable array in its device's memory (the CPU's
// included) that the host cannot index. Like DeviceBuffer it has no [], no
// data(), no span, so a host loop over a layer's activations does not
// compile; raw() is for a backend call (kernels/backend.hpp) and nothing
// else. Like AlignedBuffer it is allocated once and reused: ensure() only
// reallocates to grow, and share() lets every block of a model keep its
// internals in one set of arrays (activation recomputation, nn/recompute.hpp).
//
// On the CPU the memory is the CPU backend's, host_memory() (64-byte
// aligned, huge pages for large arrays, counted in MemoryTracker::global()):
// an AlignedBuffer is this array on that memory with element access.
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "meshtrain/core/device_buffer.hpp"

namespace meshtrain {

template <class T>
class DeviceArray {
 public:
  DeviceArray(DeviceAllocator& memory, MemoryKind kind) : memory_(&memory), kind_(kind) {}
  ~DeviceArray() { release(); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept { *this = std::move(o); }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      release();
      memory_ = o.memory_;
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      capacity_ = std::exchange(o.capacity_, 0);
      shared_ = std::exchange(o.shared_, nullptr);
      kind_ = o.kind_;
    }
    return *this;
  }

  // Sets the size to count elements; contents are unspecified. Reallocates only to grow.
  void ensure(size_t count) {
    if (shared_) return shared_->ensure(count);
    if (count > capacity_) {
      release();
      data_ = static_cast<T*>(memory_->allocate(count * sizeof(T)));
      capacity_ = count;
      memory_->tracker().add(kind_, capacity_ * sizeof(T));
    }
    size_ = count;
  }
  // Sets the size to count elements, zero-filled.
  void resize(size_t count) {
    ensure(count);
    zero();
  }
  void zero() {
    if (size()) memory_->zero(raw(), bytes());
  }
  // From now on this array is `storage` (its own memory released): ensure()
  // grows storage, raw() is storage's. nullptr: its own (empty) again.
  void share(DeviceArray* storage) {
    release();
    shared_ = storage == this ? nullptr : storage;
  }

  // For a backend call only: never dereference it on the host.
  T* raw() { return shared_ ? shared_->data_ : data_; }
  const T* raw() const { return shared_ ? shared_->data_ : data_; }
  size_t size() const { return shared_ ? shared_->size_ : size_; }
  size_t bytes() const { return size() * sizeof(T); }
  MemoryKind kind() const { return kind_; }
  DeviceAllocator& memory() const { return *memory_; }

  // The first host.size() elements to or from host memory (waits).
  void upload(std::span<const T> host) {
    check(host.size());
    if (!host.empty()) memory_->upload(raw(), host.data(), host.size_bytes());
  }
  void download(std::span<T> host) const {
    check(host.size());
    if (!host.empty()) memory_->download(host.data(), raw(), host.size_bytes());
  }
  // All of it, downloaded (tests, logging).
  std::vector<T> to_host() const {
    std::vector<T> host(size());
    download(host);
    return host;
  }

 private:
  void check(size_t count) const {
    if (count > size()) throw_device_copy_too_large(count, size());
  }
  void release() {
    if (data_) {
      memory_->tracker().sub(kind_, capacity_ * sizeof(T));
      memory_->release(data_);
    }
    data_ = nullptr;
    size_ = capacity_ = 0;
  }

  DeviceAllocator* memory_ = nullptr;
  T* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
  DeviceArray* shared_ = nullptr;  // share(): the storage this array stands for
  MemoryKind kind_ = MemoryKind::Other;
};

}  // namespace meshtrain
