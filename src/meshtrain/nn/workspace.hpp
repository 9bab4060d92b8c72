#pragma once
// Gradient buffers that live only inside one block's backward. A model owns
// one Workspace and lends it to every block in turn, so the buffers stay hot
// in cache and cost (B, T, 9C) + (B, NH, T, T) floats once, not once per layer
// (under bf16 products, (B, T, 4C) floats + (B, T, 4C) bf16: the attention
// output's gradient is made only rounded, in the layer's own copy, the MLP
// hidden layer's in dh16, and the scores' in a per-thread row block of the
// attention kernel).
#include "meshtrain/core/device_array.hpp"
#include "meshtrain/core/bf16.hpp"

namespace meshtrain::nn {

struct Workspace {
  DeviceAllocator& memory;  // the model's device's (nn/backend.hpp, memory_of)
  DeviceArray<float> dln{memory, MemoryKind::Activations};   // (B, T, C)  d of a layernorm output
  DeviceArray<float> dy{memory, MemoryKind::Activations};    // (B, T, C)  d of the attention output
  DeviceArray<float> dqkv{memory, MemoryKind::Activations};  // (B, T, 3C)
  DeviceArray<float> dh{memory, MemoryKind::Activations};    // (B, T, 4C) d of the MLP hidden layer
  DeviceArray<Bf16> dh16{memory, MemoryKind::Activations};   // (B, T, 4C) the same, bf16 products
  DeviceArray<float> datt{memory, MemoryKind::Activations};  // (B, NH, T, T), fp32 only

  // buf grown to n elements (never shrunk), as a pointer for the backend.
  template <class T>
  static T* get(DeviceArray<T>& buf, size_t n) {
    buf.ensure(n);
    return buf.raw();
  }
};

}  // namespace meshtrain::nn
