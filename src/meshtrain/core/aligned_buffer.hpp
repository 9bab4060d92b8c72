#pragma once
// A 64-byte aligned array of T whose bytes are counted under one MemoryKind.
// Page faults cost ~12 us per 4 KiB page on our machines, so buffers are
// allocated once and reused: ensure() only reallocates when asked to grow.
// Buffers of kHugePageMinBytes or more sit on 2 MiB boundaries and ask for
// transparent huge pages (huge_pages.hpp).
//
// A buffer can instead share another's storage (share()): activation
// recomputation lets every block of a model keep its internals in one set of
// buffers, since only the block being recomputed needs them.
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
      shared_ = std::exchange(o.shared_, nullptr);
      kind_ = o.kind_;
    }
    return *this;
  }

  // Sets the size to count elements, zero-filled. Reallocates only to grow.
  void resize(size_t count) {
    ensure(count);
    if (count) std::memset(data(), 0, count * sizeof(T));
  }
  // Sets the size to count elements; contents are unspecified. Reallocates only to grow.
  void ensure(size_t count) {
    if (shared_) return shared_->ensure(count);
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
    if (size()) std::memset(data(), 0, size() * sizeof(T));
  }
  // From now on this buffer is `storage` (its own memory released): ensure()
  // grows storage, data() is storage's. nullptr: its own (empty) again.
  void share(AlignedBuffer* storage) {
    release();
    shared_ = storage == this ? nullptr : storage;
  }

  T* data() { return shared_ ? shared_->data_ : data_; }
  const T* data() const { return shared_ ? shared_->data_ : data_; }
  size_t size() const { return shared_ ? shared_->size_ : size_; }
  size_t bytes() const { return size() * sizeof(T); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  std::span<T> span() { return {data(), size()}; }
  std::span<const T> span() const { return {data(), size()}; }
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
  AlignedBuffer* shared_ = nullptr;  // share(): the storage this buffer stands for
  MemoryKind kind_ = MemoryKind::Other;
};

}  // namespace meshtrain
