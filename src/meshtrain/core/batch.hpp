#pragma once
// One batch of training or evaluation data, in buffers reused across steps.
// Token models read tokens/targets (B, T); image models read pixels (B, H*W)
// and labels (B) in targets.
#include <cstdint>

#include "meshtrain/core/aligned_buffer.hpp"

namespace meshtrain {

struct Batch {
  int64_t batch_size = 0;  // B
  int64_t seq_len = 0;     // T for token models; 0 for images
  int64_t image_h = 0, image_w = 0;  // for image models
  AlignedBuffer<int32_t> tokens{MemoryKind::Data};   // (B, T) input token ids
  AlignedBuffer<int32_t> targets{MemoryKind::Data};  // (B, T) next-token ids, or (B) class labels
  AlignedBuffer<float> pixels{MemoryKind::Data};     // (B, H*W) in [0, 1]
};

// Samples [first, first + count) of `full` into `out`, whose buffers are
// reused: one micro-batch of a batch (gradient accumulation).
void copy_samples(const Batch& full, int64_t first, int64_t count, Batch& out);

}  // namespace meshtrain
