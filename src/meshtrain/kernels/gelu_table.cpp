#include "meshtrain/kernels/gelu_table.hpp"

#include <memory>

#include "meshtrain/core/cpu_dispatch.hpp"
#include "meshtrain/kernels/gelu_math.hpp"

namespace meshtrain::kernels::detail {
namespace {

// Vectorized as gelu_forward and gelu_backward are (same clone, same
// expressions), so each entry has their bits.
MESHTRAIN_HOT_LOOP
void fill(GeluTable& table) {
#pragma omp simd
  for (uint32_t bits = 0; bits < (1u << 16); ++bits) {
    const float x = to_float(Bf16{static_cast<uint16_t>(bits)});
    table.value[bits] = to_bf16(gelu_value(x)).bits;
    table.slope[bits] = gelu_slope(x);
  }
}

}  // namespace

const GeluTable& gelu_table() {
  static const std::unique_ptr<GeluTable> table = [] {
    auto t = std::make_unique<GeluTable>();
    fill(*t);
    return t;
  }();
  return *table;
}

}  // namespace meshtrain::kernels::detail
