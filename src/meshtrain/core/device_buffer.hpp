#pragma once
// Memory on a device, which the host cannot touch.
//
// A DeviceBuffer<T> has no operator[], no data(), no span: the only way to
// its elements is a DevicePtr<T>, which has no *, [] or -> either, and whose
// raw() pointer goes to a kernel launcher or a library call (cuBLASLt,
// NCCL). So a host loop over parameters, gradients or activations that would
// read device memory is a compile error here (tests/unit/core/
// device_buffer_no_host_access.sh proves it), not a crash on a GPU machine.
// Values cross only through upload() and download(): initialisation,
// checkpoints, Hugging Face interop, logging.
//
// Bytes are counted per MemoryKind in the allocator's tracker():
// MemoryTracker::device() for a GPU, beside the host's MemoryTracker::global().
#include <cstddef>
#include <span>
#include <string>
#include <utility>

#include "meshtrain/core/memory.hpp"

namespace meshtrain {

// A device's memory operations; one implementation per device kind
// (kernels/cuda/cuda_memory.cpp; the CPU tests use a host one). Every call
// is ordered after the device work already issued on the allocator's stream.
class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  virtual void* allocate(size_t bytes) = 0;  // throws DeviceError when out of memory
  virtual void release(void* p) noexcept = 0;
  virtual void zero(void* p, size_t bytes) = 0;
  virtual void upload(void* device_dst, const void* host_src, size_t bytes) = 0;    // waits until done
  virtual void download(void* host_dst, const void* device_src, size_t bytes) = 0;  // waits until done
  virtual std::string name() const = 0;  // "cuda:0", ...
  // Where its bytes are counted: the device's tracker, except for the
  // CPU's own memory, which is the host's (MemoryTracker::global()).
  virtual MemoryTracker& tracker() { return MemoryTracker::device(); }
  // Host memory this device copies to and from fastest, which the host
  // indexes: the staging buffers of the host-staged path. A GPU's is
  // page-locked (its copies go by DMA, with no bounce buffer in the
  // driver); null means the host's own (core/host_memory.hpp).
  virtual DeviceAllocator* staging_memory() { return nullptr; }
};

// A pointer into device memory (see the header comment).
template <class T>
class DevicePtr {
 public:
  DevicePtr() = default;
  explicit DevicePtr(T* p) : p_(p) {}
  template <class U>
  DevicePtr(DevicePtr<U> other) : p_(other.raw()) {}  // T* from U* (adds const)
  // For a kernel launch or a library call only: never dereference it here.
  T* raw() const { return p_; }
  DevicePtr operator+(size_t elements) const { return DevicePtr(p_ + elements); }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  T* p_ = nullptr;
};

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceAllocator& allocator, size_t count, MemoryKind kind) : allocator_(&allocator), kind_(kind) {
    if (count) data_ = static_cast<T*>(allocator.allocate(count * sizeof(T)));
    size_ = count;
    allocator.tracker().add(kind_, bytes());
  }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      allocator_ = std::exchange(o.allocator_, nullptr);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      kind_ = o.kind_;
    }
    return *this;
  }

  DevicePtr<T> ptr() { return DevicePtr<T>(data_); }
  DevicePtr<const T> ptr() const { return DevicePtr<const T>(data_); }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }
  MemoryKind kind() const { return kind_; }

  void zero() {
    if (size_) allocator_->zero(data_, bytes());
  }
  // Copies host.size() elements to the buffer's elements from `offset` on
  // (Error past its end).
  void upload(std::span<const T> host, size_t offset = 0) {
    check_fits(offset, host.size());
    if (!host.empty()) allocator_->upload(data_ + offset, host.data(), host.size_bytes());
  }
  // Copies host.size() elements from `offset` on to host.
  void download(std::span<T> host, size_t offset = 0) const {
    check_fits(offset, host.size());
    if (!host.empty()) allocator_->download(host.data(), data_ + offset, host.size_bytes());
  }

 private:
  void check_fits(size_t offset, size_t count) const;
  void reset() noexcept {
    if (allocator_) {
      allocator_->tracker().sub(kind_, bytes());
      if (data_) allocator_->release(data_);
    }
    allocator_ = nullptr;
    data_ = nullptr;
    size_ = 0;
  }

  DeviceAllocator* allocator_ = nullptr;
  T* data_ = nullptr;
  size_t size_ = 0;
  MemoryKind kind_ = MemoryKind::Other;
};

[[noreturn]] void throw_device_copy_too_large(size_t count, size_t size);

template <class T>
void DeviceBuffer<T>::check_fits(size_t offset, size_t count) const {
  if (offset > size_ || count > size_ - offset) throw_device_copy_too_large(offset + count, size_);
}

}  // namespace meshtrain
