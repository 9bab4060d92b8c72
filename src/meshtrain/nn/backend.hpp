#pragma once
// A layer's kernels: those of the device its store lives on
// (kernels/backend.hpp), so the same layer runs on every device.
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/kernels/backend.hpp"

namespace meshtrain::nn {

inline kernels::Backend& backend_of(const ParamStore& store) { return kernels::backend_for(store.device()); }

}  // namespace meshtrain::nn
