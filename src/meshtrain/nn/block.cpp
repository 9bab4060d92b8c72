#include "meshtrain/nn/block.hpp"

#include "meshtrain/core/error.hpp"

namespace meshtrain::nn {

Block::Block(ParamStore& store, const std::string& prefix, int64_t C, int64_t n_head, AttentionOptions attention,
             TensorParallelComm* tp, const FeedForwardFactory& make_ffn)
    : store_(store),
      unit_(store.begin_unit(prefix)),
      ln_1_(store, prefix + ".ln_1", C, tp),
      attn_(store, prefix + ".attn", C, n_head, attention, tp),
      ln_2_(store, prefix + ".ln_2", C, tp),
      mlp_(make_ffn ? make_ffn(store, prefix + ".mlp") : std::make_unique<Mlp>(store, prefix + ".mlp", C, tp)),
      tp_(tp),
      C_(C) {
  store.end_unit();
}

void Block::init(Rng& rng, float stddev, float proj_stddev) {
  ln_1_.init();
  attn_.init(rng, stddev, proj_stddev);
  ln_2_.init();
  mlp_->init(rng, stddev, proj_stddev);
}

void Block::set_recompute(Recompute mode, SharedActivations& pool) {
  if (mode == Recompute::Selective) attn_.recompute_scores(pool);
  if (mode != Recompute::Full) return;
  mlp_->share_activations(pool, "mlp");  // first: a mixture of experts refuses
  ln_1_.share_activations(pool, "ln_1");
  attn_.share_activations(pool, "attn", /*output=*/true);  // x1
  ln_2_.share_activations(pool, "ln_2");
  replay_ = true;
}

void Block::keep_bf16_activations(SharedActivations& pool) {
  ln_1_.share_output(pool, "ln_1");
  attn_.share_fp32_temporaries(pool, "attn");
  ln_2_.share_output(pool, "ln_2");
  mlp_->share_fp32_temporaries(pool, "mlp");
}

float* Block::forward(const float* x, int64_t B, int64_t T) {
  N_ = B * T;
  rows_ = sequence_parallel(tp_) ? sequence_rows(*tp_, N_) : N_;
  x_ = x;
  B_ = B;
  T_ = T;
  UnitScope unit(store_, unit_, UnitPass::Forward);
  return run_layers(x, B, T);
}

float* Block::run_layers(const float* x, int64_t B, int64_t T) {
  // Under bf16 products each layernorm writes the next layer's rounded input
  // where that layer takes one: no fp32 copy of it is made.
  const float* a = nullptr;
  if (Bf16* in16 = attn_.rounded_input(rows_)) {
    ln_1_.forward_rounded(x, rows_, in16);
  } else {
    a = ln_1_.forward(x, rows_);
  }
  const float* x1 = attn_.forward(a, B, T, x);  // (B, T, C) = x + attn(ln_1(x))
  const float* m = nullptr;
  if (Bf16* in16 = mlp_->rounded_input(rows_)) {
    ln_2_.forward_rounded(x1, rows_, in16);
  } else {
    m = ln_2_.forward(x1, rows_);
  }
  return mlp_->forward(m, B, T, x1);  // (B, T, C) = x1 + mlp(ln_2(x1))
}

void Block::backward(float* dres, Workspace& ws) {
  if (N_ == 0) throw Error("Block::backward called before forward");
  UnitScope unit(store_, unit_, UnitPass::Backward);
  // Full recomputation: the activations in the shared buffers are another
  // block's by now; the replay makes them this block's again (and rewrites
  // its output, the next block's kept input, with the same bits). No
  // forward UnitScope: the backward's has the parameters in place.
  if (replay_) run_layers(x_, B_, T_);
  float* dln = Workspace::get(ws.dln, rows_ * C_);  // (B, T, C), this rank's rows
  mlp_->backward(dln, dres, ws);
  ln_2_.backward(dres, dln, dres);  // dres = d x1 = d out + ln_2 branch
  attn_.backward(dln, dres, ws);
  ln_1_.backward(dres, dln, dres);  // dres = d x = d x1 + ln_1 branch
}

// No UnitScope: W reads no parameters, and the ZeRO stages that bracket
// units (2, 3) do not run under a split backward (config_schema.cpp).
void Block::backward_weight() {
  if (replay_) run_layers(x_, B_, T_);  // the weight GEMMs read the layers' saved inputs
  mlp_->backward_weight();
  attn_.backward_weight();
}

}  // namespace meshtrain::nn
