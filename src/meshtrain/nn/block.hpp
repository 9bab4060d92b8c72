#pragma once
// A pre-LN transformer block (GPT-2):
//   x1  = x  + attn(ln_1(x))
//   out = x1 + mlp(ln_2(x1))
// The same class serves GPT (causal) and ViT (non-causal attention).
// Each block is one ParamStore unit: ZeRO-3 gathers its parameters around
// its forward and its backward, ZeRO-2/3 reduce its gradients after backward.
// Layer conventions: see linear.hpp.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "meshtrain/core/param_store.hpp"
#include "meshtrain/core/rng.hpp"
#include "meshtrain/nn/attention.hpp"
#include "meshtrain/nn/feed_forward.hpp"
#include "meshtrain/nn/layernorm.hpp"
#include "meshtrain/nn/mlp.hpp"
#include "meshtrain/nn/recompute.hpp"
#include "meshtrain/nn/workspace.hpp"

namespace meshtrain::nn {

// Makes a block's feed-forward sublayer under "<prefix>.mlp", declaring its
// tensors in the block's unit (a mixture of experts: moe/moe_mlp.hpp).
using FeedForwardFactory = std::function<std::unique_ptr<FeedForward>(ParamStore& store, const std::string& prefix)>;

class Block {
 public:
  // Declares unit <prefix> holding "<prefix>.ln_1.*", "<prefix>.attn.*", "<prefix>.ln_2.*", "<prefix>.mlp.*".
  // With a tensor-parallel group, attention and MLP are split over its ranks
  // (attention.hpp, mlp.hpp); the layernorms and the residual stream stay
  // whole on every rank, or under sequence parallelism (tensor_parallel.hpp)
  // each rank holds its N/TP rows of them (N = B T).
  // make_ffn null: the dense MLP (mlp.hpp).
  Block(ParamStore& store, const std::string& prefix, int64_t C, int64_t n_head, AttentionOptions attention,
        TensorParallelComm* tp = nullptr, const FeedForwardFactory& make_ffn = nullptr);

  // Linear weights ~ N(0, stddev), the two c_proj weights ~ N(0, proj_stddev), norms 1/0, biases 0.
  void init(Rng& rng, float stddev, float proj_stddev);

  // out (B, T, C) from x (B, T, C); x must stay alive until backward.
  // Under sequence parallelism both are this rank's rows (B T / TP, C).
  float* forward(const float* x, int64_t B, int64_t T);

  // In place: dres holds d out (B, T, C) on entry and d x on return (under
  // sequence parallelism this rank's rows, as forward's). The
  // residual stream's gradient passes through both layernorm backwards,
  // which add the branch gradients into it.
  void backward(float* dres, Workspace& ws);

  // Zero-bubble split: backward() computes the input gradient (and the
  // layernorms' and biases' gradients), backward_weight() the four linears'
  // weight gradients (linear.hpp).
  void defer_weight_gradients(bool on) {
    attn_.defer_weight_gradients(on);
    mlp_->defer_weight_gradients(on);
  }
  void backward_weight();

  // Activation recomputation (recompute.hpp), with `pool` the buffers every
  // block of the model shares. Set once, before the first forward.
  void set_recompute(Recompute mode, SharedActivations& pool);
  // bf16 activations (training.precision = "bf16", recompute.hpp): the fp32
  // tensors backward does not read live in `pool`, so what the block keeps
  // is its bf16 copies and the fp32 residual stream. Set once, before the
  // first forward, with the store's precision bf16 from then on.
  void keep_bf16_activations(SharedActivations& pool);

 private:
  // The two sublayers' forward: x1 = x + attn(ln_1(x)), out = x1 + mlp(ln_2(x1)).
  float* run_layers(const float* x, int64_t B, int64_t T);

  ParamStore& store_;
  size_t unit_;  // declared before the layers: begin_unit() runs before they declare
  LayerNorm ln_1_;
  SelfAttention attn_;
  LayerNorm ln_2_;
  std::unique_ptr<FeedForward> mlp_;
  TensorParallelComm* tp_;
  bool replay_ = false;        // full recomputation
  const float* x_ = nullptr;   // the last forward's input, (B, T, C)
  int64_t B_ = 0, T_ = 0;
  int64_t N_ = 0;     // B * T
  int64_t rows_ = 0;  // this rank's rows of the residual stream: N, or N/TP under sequence parallelism
  int64_t C_;
};

}  // namespace meshtrain::nn
