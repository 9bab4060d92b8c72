#pragma once
// A GPT's mixture-of-experts settings (the [model] keys n_expert, top_k, ...).
// docs/mixture_of_experts.md explains each choice.
#include <cstdint>

namespace meshtrain::nn {

struct MoeConfig {
  int64_t n_expert = 1;  // 1: every block's MLP is dense
  int64_t top_k = 2;     // experts per token
  // Block i's MLP is a mixture of experts when i % moe_every == 0
  // (Megatron's moe_layer_freq): 1 every block, 2 blocks 0, 2, 4, ...
  int64_t moe_every = 1;
  // Tokens an expert takes per sequence: ceil(capacity_factor T k / E);
  // the rest of its tokens are dropped (their residual passes through).
  // 0: dropless, every token reaches its k experts.
  double capacity_factor = 0;
  double aux_loss_coef = 1e-2;  // Switch/GShard load balancing over the global batch
  double z_loss_coef = 0;       // router z-loss (ST-MoE): mean of logsumexp(z)^2
  // Auxiliary-loss-free balancing (DeepSeek-V3): a per-expert bias added to
  // the scores that choose the experts (not to the gates), moved by this
  // much after each step towards the mean load. 0: off.
  double expert_bias_rate = 0;

  bool enabled() const { return n_expert > 1; }
  bool is_moe_layer(int64_t layer) const { return enabled() && layer % moe_every == 0; }
  // Tokens expert e may take from one sequence of T; 0 for dropless.
  int64_t capacity(int64_t T) const;
};

}  // namespace meshtrain::nn
