#pragma once
// A layer's kernels: those of the device its store lives on
// (kernels/backend.hpp), so the same layer runs on every device.
#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/kernels/backend.hpp"

namespace meshtrain::nn {

inline kernels::Backend& backend_of(const ParamStore& store) { return kernels::backend_for(store.device()); }

// dst sized to n and filled with bf16(src[0..n)) by the store's backend;
// returns dst's data. The layers keep their rounded operands so.
inline Bf16* round_into(const ParamStore& store, const float* src, size_t n, AlignedBuffer<Bf16>& dst) {
  dst.ensure(n);
  backend_of(store).to_bf16(src, dst.data(), n);
  return dst.data();
}

}  // namespace meshtrain::nn
