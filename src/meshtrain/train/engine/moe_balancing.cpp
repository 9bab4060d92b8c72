#include "meshtrain/train/engine/moe_balancing.hpp"

#include <algorithm>

#include "meshtrain/parallel/host_staging.hpp"

namespace meshtrain {

MoeBalancing::MoeBalancing(Model& model, parallel::ParallelContext& workers) : workers_(workers) {
  auto* gpt = dynamic_cast<Gpt*>(&model);
  if (!gpt || !gpt->config().moe.enabled()) return;
  model_ = gpt;
  for (int64_t i = 0; i < gpt->config().n_layer; ++i)
    if (gpt->config().moe.is_moe_layer(i)) all_layers_.push_back(i);
}

void MoeBalancing::begin_step() {
  if (!model_) return;
  for (GptMoeLayer& l : model_->moe_layers()) l.sums->reset();
}

void MoeBalancing::add_balancing_gradients(const HeldGradients& held) {
  if (!model_) return;
  // Every layer's sums in one reduction over the data ranks.
  std::vector<double> packed;
  for (GptMoeLayer& l : model_->moe_layers()) packed.insert(packed.end(), l.sums->values().begin(), l.sums->values().end());
  workers_.data_sum(packed);
  size_t at = 0;
  const nn::MoeConfig& moe = model_->config().moe;
  for (GptMoeLayer& l : model_->moe_layers()) {
    std::span<double> v = l.sums->values();
    std::copy_n(packed.begin() + std::ptrdiff_t(at), v.size(), v.begin());
    at += v.size();
    if (moe.aux_loss_coef <= 0) continue;
    const ParamView& w = model_->store().view(l.router->weight_index());
    dw_.resize(w.numel);
    l.sums->balancing_gradient(moe.aux_loss_coef, moe.top_k, dw_.data());
    for (const HeldPart& part : held_parts(held, w))  // off the CPU, on a host copy (docs/gpu.md)
      parallel::on_host(model_->store().device_memory(), part.values, staged_, [&](std::span<float> values) {
        for (size_t i = 0; i < values.size(); ++i) values[i] += dw_[part.view_offset + i];
      });
  }
}

void MoeBalancing::after_update() {
  if (!model_) return;
  for (GptMoeLayer& l : model_->moe_layers()) l.router->update_expert_bias(*l.sums);
}

std::vector<MoeLayerReport> MoeBalancing::report() {
  if (!model_) return {};
  const nn::MoeConfig& moe = model_->config().moe;
  const size_t E = size_t(moe.n_expert), width = 4 + E;
  // One row per MoE block of the whole model: this stage fills its own.
  std::vector<double> rows(all_layers_.size() * width, 0.0);
  for (GptMoeLayer& l : model_->moe_layers()) {
    const size_t j = size_t(std::find(all_layers_.begin(), all_layers_.end(), l.layer) - all_layers_.begin());
    double* row = rows.data() + j * width;
    const nn::RouterSums& s = *l.sums;
    row[0] = s.tokens();
    row[1] = s.dropped();
    row[2] = s.balancing_loss(moe.aux_loss_coef, moe.top_k);
    row[3] = s.tokens() > 0 ? moe.z_loss_coef * s.z_squares() / s.tokens() : 0.0;
    for (size_t e = 0; e < E; ++e) row[4 + e] = s.count(int64_t(e));
  }
  workers_.pipeline_sum(rows);
  std::vector<MoeLayerReport> out;
  for (size_t j = 0; j < all_layers_.size(); ++j) {
    const double* row = rows.data() + j * width;
    out.push_back({.layer = all_layers_[j],
                   .load = std::vector<double>(row + 4, row + width),
                   .tokens = row[0],
                   .dropped = row[1],
                   .aux_loss = row[2],
                   .z_loss = row[3]});
  }
  return out;
}

}  // namespace meshtrain
