#pragma once
// Multi-head self-attention: c_attn (C -> 3C), attention, c_proj (C -> C).
// Causal for GPT; non-causal (every position sees every other) for ViT.
// Layer conventions: see linear.hpp.
#include <cstdint>
#include <string>

#include "meshtrain/core/device_array.hpp"
#include "meshtrain/nn/backend.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/core/rng.hpp"
#include "meshtrain/kernels/attention.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/nn/linear.hpp"
#include "meshtrain/nn/workspace.hpp"

namespace meshtrain::nn {

// Causal (GPT) or full (ViT), and which kernel (training.attention): a bool
// converts, for the probabilities kernel.
struct AttentionOptions {
  AttentionOptions(bool causal, kernels::AttentionKernel kernel = kernels::AttentionKernel::Probabilities)  // NOLINT
      : causal(causal), kernel(kernel) {}
  bool causal;
  kernels::AttentionKernel kernel;
};

class SelfAttention {
 public:
  // Declares "<prefix>.c_attn.*" (C, 3C) and "<prefix>.c_proj.*" (C, C).
  // With a tensor-parallel group of T ranks, each rank holds n_head/T heads:
  // c_attn is a column shard blocked by q, k, v and c_proj a row shard.
  // Throws Error when n_head does not divide C, or T does not divide n_head.
  SelfAttention(ParamStore& store, const std::string& prefix, int64_t C, int64_t n_head, AttentionOptions options,
                TensorParallelComm* tp = nullptr);

  // c_attn ~ N(0, stddev), c_proj ~ N(0, proj_stddev), biases 0.
  void init(Rng& rng, float stddev, float proj_stddev);

  // Returns residual + c_proj(attention(c_attn(inp))), all (B, T, C); residual may be null.
  // Under sequence parallelism inp, residual and the result are this rank's
  // rows (B T / TP, C): c_attn gathers whole sequences, c_proj scatters them.
  float* forward(const float* inp, int64_t B, int64_t T, const float* residual = nullptr);
  // bf16 products: where a producer may write the input (B T rows) already
  // rounded, then call forward with a null inp; null where c_attn takes only
  // an fp32 input (fp32, or sequence parallelism, which gathers it).
  kernels::Bf16* rounded_input(int64_t rows) {
    return c_attn_.takes_rounded_input() ? c_attn_.rounded_input(rows) : nullptr;
  }

  // dinp (B, T, C) written from dout (B, T, C) (rows as forward's); dout must not alias dinp.
  // The residual's own gradient is dout itself, left to the caller.
  void backward(float* dinp, const float* dout, Workspace& ws);

  // Zero-bubble split (linear.hpp): backward() leaves the weight GEMMs of
  // both linears to backward_weight().
  void defer_weight_gradients(bool on) {
    c_attn_.defer_weight_gradient(on);
    c_proj_.defer_weight_gradient(on);
  }
  void backward_weight() {
    c_proj_.backward_weight();
    c_attn_.backward_weight();
  }

  // Selective recomputation (recompute.hpp): the probabilities live in
  // `pool`'s "attn.att" (bf16: "attn.att16"), shared by every attention
  // layer, and backward computes them again from the saved q, k, v.
  void recompute_scores(SharedActivations& pool) {
    share_saved(pool);
    recompute_scores_ = true;
  }
  // Full recomputation: everything this layer saves (q, k, v, the
  // probabilities, the heads' output, and the output when `output`) lives in
  // `pool`'s "<key>.*" buffers; the block replays the forward before backward.
  void share_activations(SharedActivations& pool, const std::string& key, bool output) {
    c_attn_.share_activations(pool, key + ".c_attn");
    share_saved(pool);
    y_.share(&pool.get(key + ".y"));
    qkv16_.share(&pool.get_bf16(key + ".qkv16"));
    c_proj_.share_activations(pool, key + ".c_proj", output);
  }
  // bf16 activations (recompute.hpp): backward reads the rounded q, k, v and
  // probabilities only (forward makes no fp32 q, k, v or heads' output under
  // bf16 products); the output gradient's rounded copy lives in `pool`; the
  // output (the residual stream) stays this layer's.
  void share_fp32_temporaries(SharedActivations& pool, const std::string& key) {
    c_attn_.share_fp32_temporaries(pool, key + ".c_attn", /*output=*/true);
    dy16_.share(&pool.get_bf16(key + ".dy16"));
    c_proj_.share_fp32_temporaries(pool, key + ".c_proj", /*output=*/false);
  }

 private:
  // bf16 products (ParamStore::bf16_products): the heads' products take
  // qkv16_, and in backward dy16_, rounded copies (kernels/attention.hpp).
  kernels::AttentionBf16 bf16_operands() { return {.qkv = qkv16_.raw()}; }
  // What forward saves for backward lives in the pool's "attn.att" buffers,
  // one set for every attention layer: the backend decides what it is.
  void share_saved(SharedActivations& pool) {
    saved_.f32.share(&pool.get("attn.att"));
    saved_.b16.share(&pool.get_bf16("attn.att16"));
  }

  ParamStore& store_;
  int64_t C_, NH_;  // this rank's: C/T channels of NH/T heads
  bool causal_;
  Linear c_attn_, c_proj_;
  int64_t B_ = 0, T_ = 0;
  bool recompute_scores_ = false;
  const float* qkv_ = nullptr;                         // (B, T, 3C), owned by c_attn_; fp32 only
  kernels::AttentionSaved saved_{memory_of(store_)};                    // forward's state for backward, the backend's layout
  DeviceArray<float> y_{memory_of(store_), MemoryKind::Activations};    // (B, T, C) heads side by side, fp32 only
  DeviceArray<Bf16> qkv16_{memory_of(store_), MemoryKind::Activations};  // (B, T, 3C) bf16 only
  DeviceArray<Bf16> dy16_{memory_of(store_), MemoryKind::Activations};   // (B, T, C) bf16 only, backward's
};

}  // namespace meshtrain::nn
