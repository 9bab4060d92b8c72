#pragma once
// The precision of a model's matrix products (training.precision).
//   Fp32  every operand in fp32.
//   Bf16  the operands of the linear layers', attention's and the output
//         layer's matrix products (inputs, weights, q k v, probabilities,
//         output gradients) rounded to bf16 and kept so for backward; each product
//         exact in fp32 and summed in fp32 (kernels/gemm_bf16.hpp). Master
//         weights, gradients, optimizer state and every other kernel
//         (layernorm, softmax, the loss) stay fp32: docs/mixed_precision.md.
#include "meshtrain/core/enum_names.hpp"

namespace meshtrain {

enum class Precision { Fp32, Bf16 };
inline constexpr EnumName<Precision> kPrecisionNames[] = {{Precision::Fp32, "fp32"}, {Precision::Bf16, "bf16"}};
constexpr std::span<const EnumName<Precision>> enum_names(Precision) { return kPrecisionNames; }

}  // namespace meshtrain
