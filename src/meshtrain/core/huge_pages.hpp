#pragma once
// Large buffers on transparent huge pages.
//
// A 2 MiB page costs one page fault and one TLB entry where 4 KiB pages cost
// 512 of each, and it makes the shm transport's single-copy reads (whose
// kernel side pins every page it copies) about as fast as memcpy: measured
// here, process_vm_readv of 128 MiB ran at 4 GB/s from 4 KiB pages and
// 9.5 GB/s from huge pages, memcpy at 7-10 GB/s. This machine's THP mode is
// "madvise", so the buffer has to ask.
#include <cstddef>

namespace meshtrain {

inline constexpr size_t kHugePageBytes = size_t(2) << 20;
// Smaller buffers keep 64-byte alignment: a huge page for the last partial
// 2 MiB of a buffer wastes up to 2 MiB, at most a third of one this large.
inline constexpr size_t kHugePageMinBytes = size_t(4) << 20;

// std::free()-able memory for `bytes`: 64-byte aligned, or for at least
// kHugePageMinBytes 2 MiB aligned with MADV_HUGEPAGE (advice only: where the
// kernel has no THP it is ordinary memory). nullptr when out of memory.
void* allocate_aligned(size_t bytes);

}  // namespace meshtrain
