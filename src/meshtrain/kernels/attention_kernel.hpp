#pragma once
// Which attention kernel a layer asks for (training.attention): one that
// keeps the probabilities (B, NH, T, T) for backward (attention.hpp), or
// flash-style blocks that keep only each row's log-sum-exp
// (flash_attention.hpp): O(T) memory per head instead of O(T^2). A GPU
// backend runs flash-style kernels either way.
#include <cstdint>
#include <span>

#include "meshtrain/core/activation_memory.hpp"
#include "meshtrain/core/enum_names.hpp"

namespace meshtrain::kernels {

// Auto: flash from kAutoFlashContext tokens on, where the probabilities
// (B NH T^2) outweigh the rest of a layer's activations (about 34 B T C
// bytes: at C = 768 and 12 heads, T = 512 makes them 2 x 512 x 12 / 34 /
// 768 = 47% of it), and the kernel that keeps them below, which is faster
// there (flash recomputes the scores in backward).
enum class AttentionKernel { Auto, Probabilities, Flash };
inline constexpr EnumName<AttentionKernel> kAttentionKernelNames[] = {{AttentionKernel::Auto, "auto"},
                                                                      {AttentionKernel::Probabilities, "probabilities"},
                                                                      {AttentionKernel::Flash, "flash"}};
constexpr std::span<const EnumName<AttentionKernel>> enum_names(AttentionKernel) { return kAttentionKernelNames; }

inline constexpr int64_t kAutoFlashContext = kFlashAttentionFromContext;

// The kernel `kernel` means for sequences of up to `context` tokens.
constexpr AttentionKernel resolve_attention(AttentionKernel kernel, int64_t context) {
  if (kernel != AttentionKernel::Auto) return kernel;
  return context >= kAutoFlashContext ? AttentionKernel::Flash : AttentionKernel::Probabilities;
}

}  // namespace meshtrain::kernels
