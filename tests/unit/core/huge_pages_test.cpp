// Large buffers sit on 2 MiB boundaries (so they can be transparent huge
// pages), small ones keep 64-byte alignment; both are usable to the last byte.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/huge_pages.hpp"

namespace meshtrain {
namespace {

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

TEST(HugePages, AlignmentBySize) {
  for (size_t bytes : {size_t(1), size_t(100), kHugePageMinBytes - 1, kHugePageMinBytes, kHugePageMinBytes + 1}) {
    void* p = allocate_aligned(bytes);
    ASSERT_NE(p, nullptr);
    const size_t alignment = bytes >= kHugePageMinBytes ? kHugePageBytes : 64;
    EXPECT_EQ(address(p) % alignment, 0u) << bytes << " bytes";
    std::memset(p, 0xab, bytes);
    EXPECT_EQ(static_cast<unsigned char*>(p)[bytes - 1], 0xab);
    std::free(p);
  }
}

TEST(HugePages, AlignedBufferUsesThem) {
  AlignedBuffer<float> big(kHugePageMinBytes / sizeof(float) + 3, MemoryKind::Other);
  EXPECT_EQ(address(big.data()) % kHugePageBytes, 0u);
  EXPECT_EQ(big[big.size() - 1], 0.0f);  // zero-filled to the end
  AlignedBuffer<double> small(10, MemoryKind::Other);
  EXPECT_EQ(address(small.data()) % 64, 0u);
}

}  // namespace
}  // namespace meshtrain
