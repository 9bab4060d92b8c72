#pragma once
// Activation recomputation (training.recompute): trade FLOPs for memory by
// dropping activations after a block's forward and computing them again in
// its backward (Chen et al. 2016; Korthikanti et al. 2022 for "selective").
//   None       every block keeps all it saved for backward.
//   Selective  attention's probabilities (B, NH, T, T), the one activation
//              that grows with T^2, live in one buffer every attention
//              layer shares; each layer's backward recomputes them from its
//              saved q, k, v first (a few percent of the step).
//   Full       a block keeps only its input and its output (the next
//              block's input); everything between lives in buffers all the
//              blocks share, and the block's backward replays its forward
//              into them first (about a third more compute). A split
//              backward (zero-bubble) replays it again before the weight
//              gradients.
// The replay runs the same kernels on the same inputs, so both modes are
// bitwise equal to None.
//
// bf16 activations (training.precision = "bf16", any mode): the products
// read bf16 copies of their operands, and a backward reads those copies
// only, so a block keeps the copies (q k v, the probabilities, the linears'
// inputs, the MLP's pre-activation) and the fp32 residual stream, while the
// fp32 tensors that only feed a rounding (the layernorms' outputs, q k v,
// the heads' output, the MLP's hidden layers) live in buffers all the
// blocks share, as full recomputation's do. The bf16 output gradients that
// live only inside a backward share buffers too, and so does the GELU's
// rounded output: each MLP's backward makes it again from the kept
// pre-activation (nn/mlp.hpp), the same bits.
#include <map>
#include <memory>
#include <string>

#include "meshtrain/core/device_array.hpp"
#include "meshtrain/core/enum_names.hpp"
#include "meshtrain/kernels/bf16.hpp"

namespace meshtrain::nn {

// In the order of core/activation_memory.hpp's ActivationRecompute.
enum class Recompute { None, Selective, Full };
inline constexpr EnumName<Recompute> kRecomputeNames[] = {
    {Recompute::None, "none"}, {Recompute::Selective, "selective"}, {Recompute::Full, "full"}};
constexpr std::span<const EnumName<Recompute>> enum_names(Recompute) { return kRecomputeNames; }

// The buffers the layers of a model share under recomputation, by name
// ("attn.att", "ln_1.out", ...): one of each, grown to the largest use.
class SharedActivations {
 public:
  // In `memory`: the model's device's (nn/backend.hpp, memory_of).
  explicit SharedActivations(DeviceAllocator& memory) : memory_(memory) {}

  DeviceArray<float>& get(const std::string& name) {
    auto& buffer = buffers_[name];
    if (!buffer) buffer = std::make_unique<DeviceArray<float>>(memory_, MemoryKind::Activations);
    return *buffer;
  }

  // The same for the bf16 operands of linear layers (training.precision =
  // "bf16"), counted as `kind` (the weights' copies: MemoryKind::WeightCopies).
  DeviceArray<kernels::Bf16>& get_bf16(const std::string& name, MemoryKind kind = MemoryKind::Activations) {
    auto& buffer = bf16_buffers_[name];
    if (!buffer) buffer = std::make_unique<DeviceArray<kernels::Bf16>>(memory_, kind);
    return *buffer;
  }

 private:
  DeviceAllocator& memory_;
  std::map<std::string, std::unique_ptr<DeviceArray<float>>> buffers_;
  std::map<std::string, std::unique_ptr<DeviceArray<kernels::Bf16>>> bf16_buffers_;
};

}  // namespace meshtrain::nn
