#pragma once
// A mixture-of-experts layer's router: z = x W (N, E) (bf16 products under
// training.precision = "bf16"), p = softmax(z) in fp32, each token's top-k experts by p (plus the balancing bias, when
// auxiliary-loss-free balancing is on: it changes which experts are chosen,
// never the gates), gates renormalised over the k chosen (k = 1: the gate is
// p itself, as in Switch, since one renormalised weight would be 1 and carry
// no gradient). With a capacity, each expert takes at most
// MoeConfig::capacity(T) tokens of each sequence: first choices before
// second choices, earlier tokens first (GShard's priority); the rest are
// dropped. Counting capacity per sequence makes the dropped tokens the same
// whatever the split of the batch into ranks and micro-batches.
//
// On a device the logits' and gradients' products run there, and the
// softmax, the top-k choice, the gates and the sums on the host, on
// downloaded copies (the host-staged path, docs/gpu.md): the CPU's bits.
//
// Gradients: from the gates (the combine's dL/dg) and the z-loss (mean over
// the micro-batch's tokens, as the language-model loss) through the softmax
// into W and x; the balancing loss's gradient comes after the step from
// RouterSums (router_sums.hpp).
#include <cstdint>
#include <string>
#include <vector>

#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/device_array.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/core/rng.hpp"
#include "meshtrain/core/staged_buffer.hpp"
#include "meshtrain/nn/backend.hpp"
#include "meshtrain/nn/moe/moe_config.hpp"
#include "meshtrain/nn/moe/router_sums.hpp"

namespace meshtrain::nn {

class Router {
 public:
  // Declares "<prefix>.weight" (C, E), weight-decayed, and with
  // expert_bias_rate > 0 "<prefix>.expert_bias" (E): no gradient, moved
  // after each step by update_expert_bias.
  Router(ParamStore& store, const std::string& prefix, int64_t C, const MoeConfig& config);

  void init(Rng& rng, float stddev);

  // Routes B sequences of T tokens x (B T, C); adds the step's sums into
  // `sums` (may be null). x must stay alive until backward.
  void forward(const float* x, int64_t B, int64_t T, RouterSums* sums);
  // dx (B T, C) += the routing's input gradient from dgates (B T, k), which
  // is 0 for dropped choices; the weight's gradient is added into the store.
  void backward(const float* dgates, float* dx);

  int64_t top_k() const { return k_; }
  int64_t tokens() const { return N_; }
  const int32_t* choices() const { return choices_.data(); }  // (N, k) expert ids
  const float* gates() const { return gates_.data(); }        // (N, k)
  const uint8_t* kept() const { return kept_.data(); }        // (N, k): 0 where dropped
  size_t weight_index() const { return weight_; }
  bool has_expert_bias() const { return has_bias_; }
  size_t expert_bias_index() const { return bias_; }

  // Auxiliary-loss-free balancing: bias_e += rate * sign(mean load - load_e)
  // from the global step's counts (every rank the same bits).
  void update_expert_bias(const RouterSums& global);

 private:
  ParamStore& store_;
  int64_t C_, E_, k_;
  MoeConfig config_;
  size_t weight_, bias_ = 0;
  bool has_bias_ = false;
  const float* x_ = nullptr;
  int64_t N_ = 0;
  // (N, E): the product's logits where it runs, then the probabilities on
  // the host (uploaded for the balancing sums' products).
  StagedBuffer z_{MemoryKind::Activations};
  StagedBuffer dz_{MemoryKind::Activations};  // (N, E), backward's, computed on the host
  StagedBuffer q_{MemoryKind::Activations};   // (N, E E): the balancing sums' outer products
  DeviceArray<float> part_{memory_of(store_), MemoryKind::Activations};  // a balancing sum's product
  std::vector<float> bias_values_;  // the expert bias, on the host
  AlignedBuffer<float> lse_{MemoryKind::Activations};  // (N) logsumexp(z)
  AlignedBuffer<int32_t> choices_{MemoryKind::Activations};
  AlignedBuffer<float> gates_{MemoryKind::Activations};
  AlignedBuffer<uint8_t> kept_{MemoryKind::Activations};
  // bf16 products (training.precision = "bf16"): x and W rounded once in
  // forward, kept for backward, which rounds dz too; the softmax, the top-k
  // choice and the gates stay fp32.
  DeviceArray<Bf16> x16_{memory_of(store_), MemoryKind::Activations};   // (N, C)
  DeviceArray<Bf16> w16_{memory_of(store_), MemoryKind::WeightCopies};  // (C, E)
  DeviceArray<Bf16> dz16_{memory_of(store_), MemoryKind::Activations};  // (N, E), backward's
  // The expert bias downloaded into bias_values_.
  const float* host_bias();
  // Marks in kept_ the choices past an expert's capacity in each of the B
  // sequences of T tokens (choices_ set); returns how many were dropped.
  int64_t apply_capacity(int64_t B, int64_t T);
};

}  // namespace meshtrain::nn
