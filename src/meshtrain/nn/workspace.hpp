#pragma once
// Gradient buffers that live only inside one block's backward. A model owns
// one Workspace and lends it to every block in turn, so the buffers stay hot
// in cache and cost (B, T, 9C) + (B, NH, T, T) floats once, not once per layer
// (under bf16 products, (B, T, 4C) floats + (B, T, 4C) bf16: the attention
// output's gradient is made only rounded, in the layer's own copy, the MLP
// hidden layer's in dh16, and the scores' in a per-thread row block of the
// attention kernel).
#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/bf16.hpp"

namespace meshtrain::nn {

struct Workspace {
  AlignedBuffer<float> dln{MemoryKind::Activations};   // (B, T, C)  d of a layernorm output
  AlignedBuffer<float> dy{MemoryKind::Activations};    // (B, T, C)  d of the attention output
  AlignedBuffer<float> dqkv{MemoryKind::Activations};  // (B, T, 3C)
  AlignedBuffer<float> dh{MemoryKind::Activations};    // (B, T, 4C) d of the MLP hidden layer
  AlignedBuffer<Bf16> dh16{MemoryKind::Activations};   // (B, T, 4C) the same, bf16 products
  AlignedBuffer<float> datt{MemoryKind::Activations};  // (B, NH, T, T), fp32 only

  // buf grown to n floats (never shrunk), as a raw pointer.
  template <class T>
  static T* get(AlignedBuffer<T>& buf, size_t n) {
    buf.ensure(n);
    return buf.data();
  }
};

}  // namespace meshtrain::nn
