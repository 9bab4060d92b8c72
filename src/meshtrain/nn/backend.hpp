#pragma once
// A layer's kernels: those of the device its store lives on
// (kernels/backend.hpp), so the same layer runs on every device.
#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/device_array.hpp"
#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/kernels/backend.hpp"

namespace meshtrain::nn {

inline kernels::Backend& backend_of(const ParamStore& store) { return kernels::backend_for(store.device()); }
// The memory a layer's activations live in: its device's.
inline DeviceAllocator& memory_of(const ParamStore& store) { return backend_of(store).allocator(); }

// A layer's inputs that the host made (tokens, targets, a mixture of
// experts' routes and gates) where `backend`'s kernels read them: the
// host's own on the CPU, else a copy uploaded into `staged`, which the
// layer keeps for its backward.
template <class T>
const T* staged_input(kernels::Backend& backend, const T* host, size_t n, DeviceArray<T>& staged) {
  if (backend.device().is_cpu()) return host;
  staged.ensure(n);
  staged.upload({host, n});
  return staged.raw();
}

// The host-staged path (docs/gpu.md) for a layer whose bookkeeping runs on
// the host (a mixture of experts' routing): `n` values at `src` in the
// store's memory, readable on the host: src itself on the CPU, else a copy
// downloaded into `scratch`.
inline const float* host_copy(const ParamStore& store, const float* src, size_t n, AlignedBuffer<float>& scratch) {
  if (store.on_host()) return src;
  scratch.ensure(n);
  memory_of(store).download(scratch.data(), src, n * sizeof(float));
  return scratch.data();
}
// Where the host writes `n` values that belong at `dst` in the store's
// memory: dst itself on the CPU, else `scratch`, which put_back() uploads.
inline float* host_target(const ParamStore& store, float* dst, size_t n, AlignedBuffer<float>& scratch) {
  if (store.on_host()) return dst;
  scratch.ensure(n);
  return scratch.data();
}
inline void put_back(const ParamStore& store, float* dst, const float* host, size_t n) {
  if (!store.on_host()) memory_of(store).upload(dst, host, n * sizeof(float));
}

// dst sized to n and filled with bf16(src[0..n)) by the store's backend;
// returns dst's data. The layers keep their rounded operands so.
inline Bf16* round_into(const ParamStore& store, const float* src, size_t n, DeviceArray<Bf16>& dst) {
  dst.ensure(n);
  backend_of(store).to_bf16(src, dst.raw(), n);
  return dst.raw();
}

}  // namespace meshtrain::nn
