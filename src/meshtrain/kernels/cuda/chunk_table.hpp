#pragma once
// An optimizer's chunk table (cuda/adamw.hpp's AdamWChunk, momentum_math.hpp's
// MomentumChunk, lamb_math.hpp's LambChunk) in device memory, where its kernels read it.
// Uploaded again only when the chunks change (ZeRO rebinding moves the
// buffers), not every step: an upload waits for the device.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "meshtrain/core/device_buffer.hpp"

namespace meshtrain::kernels::cuda {

template <class Chunk>
class ChunkTable {
  static_assert(std::has_unique_object_representations_v<Chunk>, "compared bytewise: no padding");

 public:
  // The table of `chunks` on the device, uploaded through `memory` if it
  // differs from the last one.
  const Chunk* on_device(std::span<const Chunk> chunks, DeviceAllocator& memory) {
    const bool same = chunks.size() == host_.size() &&
                      (chunks.empty() || std::memcmp(chunks.data(), host_.data(), chunks.size_bytes()) == 0);
    if (!same) {
      // Uploaded before it is remembered: if the allocation or the upload
      // throws (the device's memory is full), the next call uploads again
      // instead of taking the old table on the device for this one.
      host_.clear();
      std::vector<Chunk> table(chunks.begin(), chunks.end());
      DeviceBuffer<Chunk> uploaded(memory, table.size(), MemoryKind::OptimizerState);
      uploaded.upload(table);
      device_ = std::move(uploaded);
      host_ = std::move(table);
      max_size_ = 0;
      for (const Chunk& c : host_) max_size_ = std::max<int64_t>(max_size_, c.size);
    }
    return device_.ptr().raw();
  }
  // The largest chunk's size (it sizes the update's grid).
  int64_t max_size() const { return max_size_; }

 private:
  std::vector<Chunk> host_;
  DeviceBuffer<Chunk> device_;
  int64_t max_size_ = 0;
};

}  // namespace meshtrain::kernels::cuda
