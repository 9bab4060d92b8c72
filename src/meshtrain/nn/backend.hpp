#pragma once
// A layer's kernels: those of the device its store lives on
// (kernels/backend.hpp), so the same layer runs on every device.
#include "meshtrain/core/device_array.hpp"
#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/kernels/backend.hpp"

namespace meshtrain::nn {

inline kernels::Backend& backend_of(const ParamStore& store) { return kernels::backend_for(store.device()); }
// The memory a layer's activations live in: its device's.
inline DeviceAllocator& memory_of(const ParamStore& store) { return backend_of(store).allocator(); }

// A layer's integer inputs (tokens, targets: host memory, checked there)
// where `backend`'s kernels read them: the host's own on the CPU, else a
// copy uploaded into `staged`, which the layer keeps for its backward.
inline const int32_t* staged_input(kernels::Backend& backend, const int32_t* host, size_t n,
                                   DeviceArray<int32_t>& staged) {
  if (backend.device().is_cpu()) return host;
  staged.ensure(n);
  staged.upload({host, n});
  return staged.raw();
}

// dst sized to n and filled with bf16(src[0..n)) by the store's backend;
// returns dst's data. The layers keep their rounded operands so.
inline Bf16* round_into(const ParamStore& store, const float* src, size_t n, DeviceArray<Bf16>& dst) {
  dst.ensure(n);
  backend_of(store).to_bf16(src, dst.raw(), n);
  return dst.raw();
}

}  // namespace meshtrain::nn
