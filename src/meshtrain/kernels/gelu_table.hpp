#pragma once
// The GELU of every bf16 value, for the bf16 passes (elementwise.hpp's
// gelu_*_rounded). Their input is a bf16 number, so a lookup in a table
// indexed by its 16 bits replaces the tanh's exp and division, which cost
// 0.7 ns an element against 0.3 for a pass at memory speed: the table passes
// run at about 0.4 ns. Internal to kernels/.
#include <cstdint>

#include "meshtrain/core/bf16.hpp"

namespace meshtrain::kernels::detail {

struct GeluTable {
  uint16_t value[1 << 16];  // bf16(gelu(x)) by x's bits
  float slope[1 << 16];     // gelu'(x) in fp32 by x's bits
};

// Built on first use (384 KiB, about 0.2 ms) from gelu_math.hpp's formulas in
// the instruction set's clone the fp32 passes run, so a lookup gives the bits
// gelu_forward / gelu_backward give on the widened input.
const GeluTable& gelu_table();

}  // namespace meshtrain::kernels::detail
