#pragma once
// The model a plan is for: a bare parameter count, or a GPT or ViT shape
// from which the planner derives parameters, FLOPs and activations.
//
// Legend: L layers, h hidden size, a heads, s tokens per sample (sequence
// length; a ViT's patches plus its class token), V vocabulary, E experts
// per MoE layer (every layer's MLP, when E > 1), k experts per token, b
// samples per micro-batch, t tensor-parallel ways.
#include <cstdint>
#include <span>

#include "meshtrain/core/activation_memory.hpp"
#include "meshtrain/core/enum_names.hpp"

namespace meshtrain::plan {

// model.kind: a GPT or ViT shape, or a bare parameter count.
enum class ShapeKind { Gpt, Vit, Params };
inline constexpr EnumName<ShapeKind> kShapeKindNames[] = {
    {ShapeKind::Gpt, "gpt"}, {ShapeKind::Vit, "vit"}, {ShapeKind::Params, "params"}};
constexpr std::span<const EnumName<ShapeKind>> enum_names(ShapeKind) { return kShapeKindNames; }

struct ModelShape {
  ShapeKind kind = ShapeKind::Gpt;
  double params = 0;         // kind "params": the parameter count
  double tokens_per_sample = 1;               // kind "params": s
  double activation_bytes_per_sample = 0;     // kind "params": measured elsewhere; 0 = unknown
  int64_t layers = 0, hidden = 0, heads = 0;  // L, h, a
  int64_t seq_len = 0, vocab = 0;             // gpt: s, V
  int64_t image_size = 0, patch_size = 0, channels = 3, classes = 0;  // vit
  int64_t experts = 1, top_k = 1;             // E, k
  bool flash_attention = false;  // attention keeps no probabilities (model.flash_attention)

  // Throws ConfigError naming the field ("model.heads: ...").
  void validate() const;
  bool has_shape() const { return kind != ShapeKind::Params; }
  bool is_moe() const { return experts > 1; }
  double tokens() const;  // s

  double parameters() const;         // all of them
  double expert_parameters() const;  // the E experts' MLPs of every layer (0 without MoE)
  double active_parameters() const;  // what one token passes through: dense part + k experts

  // Training FLOPs per sample: (6 N_active + 12 L h s) per token, or 8 and
  // 16 when every layer's forward runs twice (activation recomputation).
  double train_flops_per_sample(bool recompute) const;

  // Activation bytes one device keeps for backward per micro-batch of b
  // samples, at `act_bytes` per element (2 for 16-bit, 4 for fp32):
  // Korthikanti et al. (2022) per layer, the recomputation mode, one layer's
  // backward gradients, the ends and the fp32 logits
  // (core/activation_memory.hpp). Other frameworks train with dropout;
  // meshtrain has none (dropout = false: its own runs). With
  // flash_attention, no probabilities: a log-sum-exp per row instead.
  double activation_bytes(double b, int t, ActivationRecompute mode, double act_bytes, bool dropout = true) const;
  // recompute: full recomputation, else none.
  double activation_bytes(double b, int t, bool recompute, double act_bytes) const;

  // Bytes of one layer's output activation for one micro-batch, s b h
  // act_bytes: what tensor parallelism all-reduces and a pipeline stage sends.
  double layer_output_bytes(double b, double act_bytes) const;
};

}  // namespace meshtrain::plan
