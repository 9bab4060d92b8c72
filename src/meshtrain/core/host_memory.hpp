#pragma once
// The host's memory as a DeviceAllocator: the CPU backend's memory
// (kernels/cpu_backend.cpp) and every AlignedBuffer's. 64-byte aligned,
// arrays of kHugePageMinBytes or more on 2 MiB boundaries with transparent
// huge pages (huge_pages.hpp), counted in MemoryTracker::global().
#include "meshtrain/core/device_buffer.hpp"

namespace meshtrain {

DeviceAllocator& host_memory();

}  // namespace meshtrain
