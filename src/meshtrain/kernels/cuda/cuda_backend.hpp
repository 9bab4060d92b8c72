#pragma once
// The GPU's kernels behind kernels::Backend: each call launches the CUDA
// twin of the CPU kernel on the backend's stream, with the scratch it needs
// kept between calls (grown, never shrunk).
#include "meshtrain/kernels/backend.hpp"

namespace meshtrain::kernels::cuda {

// GPU `index`'s backend: opens the device (device_probe.hpp) and creates
// its stream on first use; one per GPU for the life of the process.
Backend& backend(int index);

}  // namespace meshtrain::kernels::cuda
