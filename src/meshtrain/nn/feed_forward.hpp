#pragma once
// A transformer block's feed-forward sublayer, as the block sees it: the
// dense MLP (mlp.hpp) or a mixture of experts (moe/moe_mlp.hpp). Both add
// the block's residual stream into their output and keep what backward
// needs; layer conventions: see linear.hpp.
#include <cstdint>

#include <string>

#include "meshtrain/core/rng.hpp"
#include "meshtrain/nn/recompute.hpp"
#include "meshtrain/nn/workspace.hpp"

namespace meshtrain::nn {

class FeedForward {
 public:
  virtual ~FeedForward() = default;
  // Linear weights ~ N(0, stddev), the output projections ~ N(0, proj_stddev).
  virtual void init(Rng& rng, float stddev, float proj_stddev) = 0;
  // residual + ffn(inp) for B sequences of T tokens, (B T, C); residual may be null.
  virtual float* forward(const float* inp, int64_t B, int64_t T, const float* residual) = 0;
  // dinp (B T, C) written from dout; dout must not alias dinp.
  virtual void backward(float* dinp, const float* dout, Workspace& ws) = 0;
  // Zero-bubble split (linear.hpp): the weight GEMMs wait for backward_weight().
  virtual void defer_weight_gradients(bool on) = 0;
  virtual void backward_weight() = 0;
  // Full recomputation (recompute.hpp): what forward saves for backward,
  // except the output, in `pool`'s "<key>.*" buffers. A layer that cannot
  // replay its forward (a mixture of experts: the replay would route and
  // exchange tokens again) throws Error.
  virtual void share_activations(SharedActivations& pool, const std::string& key) = 0;
  // bf16 activations (recompute.hpp): the fp32 tensors backward does not
  // read in `pool`'s "<key>.*" buffers. By default a layer keeps them (a
  // mixture of experts: its experts' hidden layers are its own buffers).
  virtual void share_fp32_temporaries(SharedActivations& /*pool*/, const std::string& /*key*/) {}
  // bf16 products: where a producer may write the input already rounded,
  // then call forward with a null inp; null (the default) where the layer
  // reads its fp32 input (a mixture of experts' router).
  virtual Bf16* rounded_input(int64_t /*rows*/) { return nullptr; }
};

}  // namespace meshtrain::nn
