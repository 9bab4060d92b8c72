#pragma once
// The transformer's feed-forward sublayer: c_fc (C -> 4C), GELU, c_proj (4C -> C).
// Layer conventions: see linear.hpp.
#include <cstdint>
#include <string>

#include "meshtrain/core/device_array.hpp"
#include "meshtrain/nn/backend.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/core/rng.hpp"
#include "meshtrain/nn/feed_forward.hpp"
#include "meshtrain/nn/linear.hpp"
#include "meshtrain/nn/workspace.hpp"

namespace meshtrain::nn {

class Mlp final : public FeedForward {
 public:
  // Declares "<prefix>.c_fc.*" (C, 4C) and "<prefix>.c_proj.*" (4C, C). With
  // a tensor-parallel group, c_fc is a column shard and c_proj a row shard:
  // each rank computes 4C/T of the hidden units.
  Mlp(ParamStore& store, const std::string& prefix, int64_t C, TensorParallelComm* tp = nullptr);

  void init(Rng& rng, float stddev, float proj_stddev) override;

  // Returns residual + c_proj(gelu(c_fc(inp))), (N, C); residual may be null.
  // Under sequence parallelism inp, residual and the result are this rank's
  // rows (N/TP, C) of the N.
  float* forward(const float* inp, int64_t N, const float* residual = nullptr);
  float* forward(const float* inp, int64_t B, int64_t T, const float* residual) override {
    return forward(inp, B * T, residual);
  }
  // The same (no residual) into the caller's memory: h and gelu (N, H) with
  // H = hidden_features(), kept alive until backward (fp32 only: bf16
  // products keep their rounded copies, and neither is read), and out (N, C).
  // For experts sharing their layer's buffers (moe_mlp.hpp). Returns out.
  float* forward_into(const float* inp, int64_t N, float* h, float* gelu, float* out);
  int64_t hidden_features() const { return c_fc_.out_features(); }  // 4C, or this rank's 4C/T
  Bf16* rounded_input(int64_t rows) override {
    return c_fc_.takes_rounded_input() ? c_fc_.rounded_input(rows) : nullptr;
  }

  // dinp (N, C) written (rows as forward's); dout must not alias dinp.
  void backward(float* dinp, const float* dout, Workspace& ws) override;
  // Announces its tensors' gradients as final (ParamStore::grad_ready)
  // without a backward: an expert no token reached this micro-batch.
  void announce_gradients() {
    c_fc_.announce_gradients();
    c_proj_.announce_gradients();
  }

  // Zero-bubble split (linear.hpp): backward() leaves the weight GEMMs of
  // both linears to backward_weight().
  void defer_weight_gradients(bool on) override {
    c_fc_.defer_weight_gradient(on);
    c_proj_.defer_weight_gradient(on);
    weights_deferred_ = on;
  }
  void backward_weight() override {
    recompute_gelu();
    c_proj_.backward_weight();
    c_fc_.backward_weight();
  }
  // The hidden layer before and after the GELU in `pool`; the output stays
  // this layer's own (it is the block's output, the next block's input).
  void share_activations(SharedActivations& pool, const std::string& key) override {
    replayed_ = true;
    c_fc_.share_activations(pool, key + ".c_fc");
    gelu_.share(&pool.get(key + ".gelu"));
    h16_.share(&pool.get_bf16(key + ".h16"));
    c_proj_.share_activations(pool, key + ".c_proj", /*output=*/false);
  }
  // bf16 activations: c_fc writes the pre-activation and the GELU its output
  // only rounded, which is what backward reads; the linears' fp32 work areas
  // live in `pool`. The GELU's output, c_proj's rounded input, lives there
  // too: each backward makes it again from the kept pre-activation before
  // c_proj's weight gradient reads it (one elementwise pass for a quarter of
  // a layer's saved bytes, as torch.compile's partitioner recomputes
  // pointwise ops; the same kernel on the same input, so the same bits).
  void share_fp32_temporaries(SharedActivations& pool, const std::string& key) override {
    c_fc_.share_fp32_temporaries(pool, key + ".c_fc", /*output=*/true);
    c_proj_.share_fp32_temporaries(pool, key + ".c_proj", /*output=*/false);
    c_proj_.share_rounded_input(pool, key + ".c_proj.in16");
    gelu_recomputed_ = true;
  }

 private:
  // bf16 products: c_fc's output (N rows) written only rounded, into h16_
  // (oneDNN rounds as it stores), and its GELU as c_proj's rounded input:
  // neither the pre-activation nor the GELU's output is made in fp32.
  void gelu_rounded(const float* inp, int64_t N);
  // The GELU's rounded output again from h16_ before c_proj's weight
  // gradient reads it, when it lives in a shared buffer
  // (share_fp32_temporaries) that another layer may have written. Not under
  // full recomputation: the block's replay has just made it (before
  // backward, and again before a deferred backward_weight()).
  void recompute_gelu();

  ParamStore& store_;
  int64_t C_;
  Linear c_fc_, c_proj_;
  int64_t N_ = 0;
  bool gelu_recomputed_ = false;   // c_proj's rounded input shared: made again before its weight gradient
  bool replayed_ = false;          // full recomputation (share_activations)
  bool weights_deferred_ = false;  // backward() leaves the weight gradients to backward_weight()
  const float* h_ = nullptr;                            // (N, 4C) pre-activation, owned by c_fc_ (fp32 only)
  DeviceArray<float> gelu_{memory_of(store_), MemoryKind::Activations};  // (N, 4C)
  // bf16 products only: the pre-activation, rounded by c_fc's product, what
  // the GELU's two passes read (as PyTorch's autocast keeps a bf16 linear's
  // output).
  DeviceArray<Bf16> h16_{memory_of(store_), MemoryKind::Activations};  // (N, 4C)
};

}  // namespace meshtrain::nn
