#include "meshtrain/nn/vit.hpp"

#include <cmath>
#include <string>

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/embedding.hpp"
#include "meshtrain/nn/backend.hpp"
#include "meshtrain/nn/init.hpp"

namespace meshtrain {

namespace {
const VitConfig& checked(const VitConfig& c, const nn::TensorParallelComm* tp) {
  if (c.image_size <= 0 || c.patch_size <= 0 || c.channels <= 0 || c.n_layer <= 0 || c.n_embd <= 0 ||
      c.n_head <= 0 || c.classes <= 0)
    throw ConfigError("vit: every size in the config must be positive");
  if (c.image_size % c.patch_size != 0)
    throw ConfigError("vit: patch_size " + std::to_string(c.patch_size) + " does not divide image_size " +
                      std::to_string(c.image_size));
  if (c.n_embd % c.n_head != 0)
    throw ConfigError("vit: n_embd " + std::to_string(c.n_embd) + " is not divisible by n_head " +
                      std::to_string(c.n_head));
  if (nn::sequence_parallel(tp))
    throw ConfigError("vit: sequence parallelism is built for gpt (the vit's patch embedding, pos_embed and mean "
                      "pooling read whole sequences)");
  return c;
}

std::vector<std::unique_ptr<nn::Block>> make_blocks(ParamStore& store, const VitConfig& c,
                                                    nn::TensorParallelComm* tp, nn::SharedActivations& recomputed) {
  store.set_compute_precision(c.precision);  // first: the blocks choose what they keep by it
  std::vector<std::unique_ptr<nn::Block>> blocks;
  const int64_t patches = (c.image_size / c.patch_size) * (c.image_size / c.patch_size);
  const nn::AttentionOptions attention(false, kernels::resolve_attention(c.attention, patches));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    blocks.push_back(std::make_unique<nn::Block>(store, "h." + std::to_string(i), c.n_embd, c.n_head, attention, tp));
    blocks.back()->set_recompute(c.recompute, recomputed);
    if (c.precision == Precision::Bf16) blocks.back()->keep_bf16_activations(recomputed);
  }
  return blocks;
}
}  // namespace

Vit::Vit(const VitConfig& config, nn::TensorParallelComm* tp)
    : Model(config.device),
      config_(checked(config, tp)),
      np_((config.image_size / config.patch_size) * (config.image_size / config.patch_size)),
      patch_dim_(config.channels * config.patch_size * config.patch_size),
      patch_embed_(store_, "patch_embed", patch_dim_, config.n_embd),
      pos_(store_.declare("pos_embed", {np_, config.n_embd}, false)),
      blocks_(make_blocks(store_, config_, tp, recomputed_)),
      ln_f_(store_, "ln_f", config.n_embd),
      head_(store_, "head", config.n_embd, config.classes),
      xent_(nn::backend_of(store_)) {
  store_.allocate();
}

void Vit::draw_parameters(Rng& rng) {
  const float stddev = 0.02f;
  patch_embed_.init(rng, stddev);
  nn::fill_normal(store_, pos_, rng, stddev);
  for (auto& block : blocks_) block->init(rng, stddev, stddev / std::sqrt(2.0f * config_.n_layer));
  ln_f_.init();
  head_.init(rng, stddev);
}

ForwardResult Vit::forward(const Batch& batch) {
  const int64_t B = batch.batch_size, S = config_.image_size, C = config_.n_embd;
  if (B <= 0) throw Error("vit: batch size must be positive");
  if ((batch.image_h && batch.image_h != S) || (batch.image_w && batch.image_w != S))
    throw Error("vit: images are " + std::to_string(batch.image_h) + "x" + std::to_string(batch.image_w) +
                ", model expects " + std::to_string(S) + "x" + std::to_string(S));
  const size_t need = static_cast<size_t>(B * config_.channels * S * S);
  if (batch.pixels.size() < need || batch.targets.size() < static_cast<size_t>(B))
    throw Error("vit: batch needs " + std::to_string(need) + " pixels and " + std::to_string(B) + " targets");
  B_ = B;
  patches_.ensure(B * np_ * patch_dim_);
  const float* pixels = nn::staged_input(nn::backend_of(store_), batch.pixels.data(), need, pixels_);
  nn::backend_of(store_).patchify(patches_.raw(), pixels, B, config_.channels, S, S, config_.patch_size);
  float* x = patch_embed_.forward(patches_.raw(), B * np_);  // (B, NP, C)
  nn::backend_of(store_).position_add_forward(x, store_.param(pos_), B, np_, C);
  const float* h = x;
  for (auto& block : blocks_) h = block->forward(h, B, np_);
  const float* lnf = ln_f_.forward(h, B * np_);  // (B, NP, C)
  pooled_.ensure(B * C);
  nn::backend_of(store_).meanpool_forward(pooled_.raw(), lnf, B, np_, C);
  const float* logits = head_.forward(pooled_.raw(), B);  // (B, classes)
  ready_ = true;
  return xent_.forward(logits, batch.targets.data(), B, config_.classes);
}

void Vit::backward() {
  if (!ready_) throw Error("vit: backward() called before forward()");
  ready_ = false;
  const int64_t B = B_, C = config_.n_embd;
  float* dlogits = head_.output();  // in place over the logits
  xent_.backward(dlogits);
  dpooled_.ensure(B * C);
  head_.backward(dpooled_.raw(), dlogits);
  float* dlnf = nn::Workspace::get(ws_.dln, B * np_ * C);  // (B, NP, C)
  nn::backend_of(store_).meanpool_backward(dlnf, dpooled_.raw(), B, np_, C);
  dres_.ensure(B * np_ * C);
  float* dres = dres_.raw();
  ln_f_.backward(dres, dlnf);
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) (*it)->backward(dres, ws_);
  nn::backend_of(store_).position_add_backward(store_.grad(pos_), dres, B, np_, C);
  store_.grad_ready(pos_);
  patch_embed_.backward(nullptr, dres);
}

double Vit::flops_per_sample() const {
  const double L = config_.n_layer, C = config_.n_embd, NP = static_cast<double>(np_);
  const double per_patch = 6.0 * (patch_dim_ * C + 12.0 * L * C * C) + 12.0 * L * C * NP;
  return NP * per_patch + 6.0 * C * config_.classes;
}

}  // namespace meshtrain
