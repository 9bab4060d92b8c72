#include "meshtrain/core/huge_pages.hpp"

#include <cstdlib>
#include <sys/mman.h>

namespace meshtrain {

void* allocate_aligned(size_t bytes) {
  if (bytes < kHugePageMinBytes) return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  const size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* p = std::aligned_alloc(kHugePageBytes, rounded);
  // Before the first touch, so the faults themselves bring huge pages.
  if (p != nullptr) ::madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}

}  // namespace meshtrain
