#pragma once
// Activation memory of a GPT-style transformer for one micro-batch, after
// Korthikanti et al. (2022), "Reducing Activation Recomputation in Large
// Transformer Models": what the planner assumes for any framework and what
// meshtrain's trainer reports beside its measured peak, so the two agree.
//
// Per layer, in bytes at 16 bits per element (s sequence, b micro-batch,
// h hidden, a heads, t tensor-parallel ways; scaled by act_bytes / 2):
//   with dropout      s b h (10 + 24/t + 5 a s / (h t))
//   without dropout   s b h ( 8 + 24/t + 2 a s / (h t))
// Without dropout there are no masks, and the softmax's output is also what
// attention multiplies with V. meshtrain has no dropout; its layers keep
// exactly these tensors: the block input and ln_1's output, q k v, the
// probabilities and the heads' output, x1 and ln_2's output, and the MLP's
// hidden layer before and after the GELU.
//   selective recomputation  the a s / (h t) term is kept for one layer only
//                            (the probabilities are recomputed)
//   full recomputation       each layer keeps its input, 2 s b h, and one
//                            layer's whole set is live while it is replayed
// On top, whatever the mode:
//   - one layer's backward gradients, s b h (2 + 16/t + 2 a s / (h t)): the
//     gradients of a layernorm's output, of the heads' output, of q k v, of
//     the MLP's hidden layer, and of the probabilities (meshtrain's bf16:
//     10/t for 16/t, and no a s term, below);
//   - the embedding's output and the final norm's, 4 s b h;
//   - the loss's inputs in fp32: the logits, 4 s b V / t (head_floats).
// A mixture of experts' k - 1 further experts per token add their MLP's
// hidden layers, s b h (k - 1) (16 + 3 with dropout) / t.
// A pipeline stage multiplies the per-layer terms by its layers and by the
// micro-batches its schedule keeps in flight; that is not modelled here.
//
// meshtrain's bf16 (training.precision = "bf16", nn/recompute.hpp) keeps
// the saved tensors in bf16 but the residual stream (a block's input and
// x1, the embedding's and the final norm's outputs) and the activation
// gradients in fp32: residual_bytes = gradient_bytes = 4. On top
// (mixed_copies), once per model: the bf16 output gradients a backward
// rounds, s b h 2 (4 + 1)/t; and the output layer's bf16 operands,
// s b h 2 + 2 s b V / t (the logits' gradient). Its fused classifier (no
// vocabulary split) holds the fp32 logits of one block of rows only
// (head_chunk_floats). No fp32 tensor is made only to be rounded: the
// layernorms' outputs, q k v, the MLP's pre-activation, the heads' output
// and the GELU's output are written only in bf16, by the kernels that make
// them (under sequence parallelism the layernorms' outputs are fp32 too,
// 8 s b h / t more, not counted). The GELU's output is not kept either: one
// buffer all the layers share, made again from the pre-activation in each
// backward (nn/mlp.hpp): 8/t of the 24/t per layer, s b h 8/t once.
//
// Flash attention (training.attention = "flash", kernels/flash_attention.hpp)
// keeps no probabilities: the a s / (h t) term goes, in the layers and in
// the backward gradients, and each layer keeps instead its rows' fp32
// log-sum-exp, 4 s b a / t bytes.
#include <cstdint>

namespace meshtrain {

enum class ActivationRecompute { None, Selective, Full };

// From this context on, meshtrain's default attention (training.attention =
// "auto", kernels/attention_kernel.hpp) is flash, and the planner assumes it.
inline constexpr int64_t kFlashAttentionFromContext = 512;

struct ActivationShape {
  double seq = 0, micro_batch = 0, hidden = 0, heads = 0, layers = 0;
  double head_floats = 0;  // the loss's fp32 inputs (a GPT's logits, s b V / t)
  double tensor = 1;       // tensor-parallel ways
  double act_bytes = 4;    // bytes per element: 4 for fp32, 2 for bf16/fp16
  double extra_experts = 0;  // top_k - 1 of a mixture of experts
  bool dropout = false;
  double residual_bytes = 0;  // the residual stream's bytes per element; 0: act_bytes
  double gradient_bytes = 0;  // the activation gradients'; 0: act_bytes
  bool mixed_copies = false;  // meshtrain's bf16 work areas and copies (above)
  bool flash_attention = false;  // no probabilities kept, a log-sum-exp per row (above)
  // meshtrain's fused classifier (bf16 without a vocabulary split,
  // nn/gpt.hpp): the fp32 logits of one block of rows only; 0: all of them.
  double head_chunk_floats = 0;
};

inline double activation_bytes(const ActivationShape& m, ActivationRecompute mode) {
  const double sbh = m.seq * m.micro_batch * m.hidden, t = m.tensor, scale = m.act_bytes / 2;
  const double residual = (m.residual_bytes > 0 ? m.residual_bytes : m.act_bytes) / 2;
  const double gradient = (m.gradient_bytes > 0 ? m.gradient_bytes : m.act_bytes) / 2;
  const double attention = m.flash_attention ? 0.0 : (m.dropout ? 5.0 : 2.0) * m.heads * m.seq / (m.hidden * t);
  const double lse = m.flash_attention ? 4 * m.seq * m.micro_batch * m.heads / t : 0.0;
  // Of the 8 (10 with dropout) whole-width bytes, 4 are the residual
  // stream's two tensors (the block's input and x1).
  // meshtrain's bf16 shares the GELU's output (8/t) among the layers.
  const double gelu_output = m.mixed_copies ? 8.0 / t : 0.0;
  const double linear =
      (m.dropout ? 6.0 : 4.0) + (24.0 + m.extra_experts * (m.dropout ? 19.0 : 16.0)) / t - gelu_output;
  const double layer = sbh * (4 * residual + (linear + attention) * scale) + lse;
  double layers = 0;
  switch (mode) {
    case ActivationRecompute::None: layers = m.layers * layer; break;
    case ActivationRecompute::Selective: layers = m.layers * (layer - sbh * attention * scale) + sbh * attention * scale; break;
    case ActivationRecompute::Full: layers = m.layers * 2 * sbh * residual + layer; break;
  }
  // In units of 2 bytes per s b h: fp32's widths are the heads' output's 2,
  // q k v's 6 and the MLP hidden layer's 8 (16/t); meshtrain's bf16 makes
  // the heads' output gradient only rounded (in a copy the layer keeps
  // anyway) and the hidden layer's in bf16: 6 + 4 (10/t). Its attention
  // kernel keeps the probabilities' gradient for one row block of one head
  // at a time, per thread: no a s term.
  const double widths = m.mixed_copies ? 10.0 / t : 16.0 / t;
  const double scores = m.mixed_copies || m.flash_attention ? 0.0 : 2.0 * m.heads * m.seq / (m.hidden * t);
  const double backward = sbh * (2 + widths + scores) * gradient;
  const double ends = 4 * sbh * residual;
  const double copies = m.mixed_copies ? sbh * (10.0 / t + 2 + gelu_output) + 2 * m.head_floats : 0;
  const double logits = m.head_chunk_floats > 0 ? m.head_chunk_floats : m.head_floats;
  return layers + backward + ends + 4 * logits + copies;
}

}  // namespace meshtrain
