#include "meshtrain/kernels/device_peak.hpp"

#include <array>

namespace meshtrain::kernels {
namespace {

struct GpuPeak {
  std::string_view model;    // in the device's name
  std::string_view variant;  // also in it ("" : any); the first row that matches wins
  double bf16, fp32;         // dense TFLOP/s
};

// NVIDIA's datasheets (dense figures: half the "with sparsity" ones).
// The SXM parts come last among their family: their names carry no form factor.
constexpr std::array<GpuPeak, 7> kPeaks{{
    {"H100", "PCIe", 756.0, 51.2},
    {"H100", "NVL", 835.0, 60.0},
    {"H200", "NVL", 835.0, 60.0},
    {"H100", "", 989.4, 66.9},
    {"H200", "", 989.4, 66.9},
    {"A100", "", 312.0, 19.5},
    {"L40S", "", 362.0, 91.6},
}};

}  // namespace

double known_peak_tflops(std::string_view gpu_name, Precision precision) {
  for (const GpuPeak& p : kPeaks)
    if (gpu_name.find(p.model) != std::string_view::npos &&
        (p.variant.empty() || gpu_name.find(p.variant) != std::string_view::npos))
      return precision == Precision::Bf16 ? p.bf16 : p.fp32;
  return 0;
}

}  // namespace meshtrain::kernels
