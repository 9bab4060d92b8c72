#pragma once
// Gradient buffers that live only inside one block's backward. A model owns
// one Workspace and lends it to every block in turn, so the buffers stay hot
// in cache and cost (B, T, 9C) + (B, NH, T, T) floats once, not once per layer.
#include "meshtrain/core/aligned_buffer.hpp"

namespace meshtrain::nn {

struct Workspace {
  AlignedBuffer<float> dln{MemoryKind::Activations};   // (B, T, C)  d of a layernorm output
  AlignedBuffer<float> dy{MemoryKind::Activations};    // (B, T, C)  d of the attention output
  AlignedBuffer<float> dqkv{MemoryKind::Activations};  // (B, T, 3C)
  AlignedBuffer<float> dh{MemoryKind::Activations};    // (B, T, 4C) d of the MLP hidden layer
  AlignedBuffer<float> datt{MemoryKind::Activations};  // (B, NH, T, T)

  // buf grown to n floats (never shrunk), as a raw pointer.
  static float* get(AlignedBuffer<float>& buf, size_t n) {
    buf.ensure(n);
    return buf.data();
  }
};

}  // namespace meshtrain::nn
