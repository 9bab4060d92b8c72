#include "meshtrain/core/host_memory.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

#include "meshtrain/core/huge_pages.hpp"

namespace meshtrain {
namespace {

class HostMemory final : public DeviceAllocator {
 public:
  void* allocate(size_t bytes) override {
    void* p = allocate_aligned(bytes);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void release(void* p) noexcept override { std::free(p); }
  void zero(void* p, size_t bytes) override { std::memset(p, 0, bytes); }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  std::string name() const override { return "cpu"; }
  MemoryTracker& tracker() override { return MemoryTracker::global(); }
};

}  // namespace

DeviceAllocator& host_memory() {
  static HostMemory memory;
  return memory;
}

}  // namespace meshtrain
