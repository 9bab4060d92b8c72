#pragma once
// A 64-byte aligned array of T whose bytes are counted under one MemoryKind.
// Page faults cost ~12 us per 4 KiB page on our machines, so buffers are
// allocated once and reused: ensure() only reallocates when asked to grow.
// Buffers of kHugePageMinBytes or more sit on 2 MiB boundaries and ask for
// transparent huge pages (huge_pages.hpp).
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <utility>

#include "meshtrain/core/huge_pages.hpp"
#include "meshtrain/core/memory.hpp"

namespace meshtrain {

template <class T>
class AlignedBuffer {
 public:
  explicit AlignedBuffer(MemoryKind kind = MemoryKind::Other) : kind_(kind) {}
  AlignedBuffer(size_t count, MemoryKind kind) : kind_(kind) { resize(count); }
  ~AlignedBuffer() { release(); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept { *this = std::move(o); }
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      capacity_ = std::exchange(o.capacity_, 0);
      kind_ = o.kind_;
    }
    return *this;
  }

  // Sets the size to count elements, zero-filled. Reallocates only to grow.
  void resize(size_t count) {
    ensure(count);
    if (count) std::memset(data_, 0, count * sizeof(T));
  }
  // Sets the size to count elements; contents are unspecified. Reallocates only to grow.
  void ensure(size_t count) {
    if (count > capacity_) {
      release();
      data_ = static_cast<T*>(allocate_aligned(count * sizeof(T)));
      if (!data_) throw std::bad_alloc();
      capacity_ = count;
      MemoryTracker::global().add(kind_, capacity_ * sizeof(T));
    }
    size_ = count;
  }
  void zero() {
    if (size_) std::memset(data_, 0, size_ * sizeof(T));
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  std::span<T> span() { return {data_, size_}; }
  std::span<const T> span() const { return {data_, size_}; }
  MemoryKind kind() const { return kind_; }

 private:
  void release() {
    if (data_) {
      MemoryTracker::global().sub(kind_, capacity_ * sizeof(T));
      std::free(data_);
    }
    data_ = nullptr;
    size_ = capacity_ = 0;
  }

  T* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
  MemoryKind kind_ = MemoryKind::Other;
};

}  // namespace meshtrain
