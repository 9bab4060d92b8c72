#pragma once
// What a device can do at most, for the metrics' model FLOPs utilisation
// (mfu): the dense peak of the matrix products its datasheet gives.
#include <string_view>

#include "meshtrain/core/precision.hpp"

namespace meshtrain::kernels {

// TFLOP/s of one GPU named `gpu_name` (cudaDeviceProp::name, "NVIDIA H100 80GB HBM3") for the products
// at `precision`: bf16 on the tensor cores, dense (no sparsity); fp32 without TF32, as meshtrain's fp32
// products run. 0 for a name not in the table (set training.peak_tflops instead).
double known_peak_tflops(std::string_view gpu_name, Precision precision);

}  // namespace meshtrain::kernels
