#include "meshtrain/nn/mlp_classifier.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "meshtrain/core/error.hpp"
#include "meshtrain/nn/backend.hpp"

namespace meshtrain {

namespace {
const MlpConfig& checked(const MlpConfig& c) {
  if (c.input_dim <= 0 || c.classes <= 0) throw ConfigError("mlp: input_dim and classes must be positive");
  for (int64_t h : c.hidden)
    if (h <= 0) throw ConfigError("mlp: every hidden size must be positive, got " + std::to_string(h));
  return c;
}

std::vector<std::unique_ptr<nn::Linear>> make_hidden(ParamStore& store, const MlpConfig& c) {
  std::vector<std::unique_ptr<nn::Linear>> fc;
  int64_t in = c.input_dim;
  for (size_t i = 0; i < c.hidden.size(); ++i) {
    fc.push_back(std::make_unique<nn::Linear>(store, "fc." + std::to_string(i), in, c.hidden[i]));
    in = c.hidden[i];
  }
  return fc;
}
}  // namespace

MlpClassifier::MlpClassifier(const MlpConfig& config)
    : Model(config.device),
      config_(checked(config)),
      fc_(make_hidden(store_, config_)),
      head_(store_, "head", config.hidden.empty() ? config.input_dim : config.hidden.back(), config.classes),
      xent_(nn::backend_of(store_)) {
  for (size_t i = 0; i < fc_.size(); ++i) act_.emplace_back(nn::memory_of(store_), MemoryKind::Activations);
  store_.allocate();
}

void MlpClassifier::draw_parameters(Rng& rng) {
  for (auto& fc : fc_) fc->init(rng, 1.0f / std::sqrt(static_cast<float>(fc->in_features())));
  head_.init(rng, 1.0f / std::sqrt(static_cast<float>(head_.in_features())));
}

ForwardResult MlpClassifier::forward(const Batch& batch) {
  const int64_t B = batch.batch_size;
  if (B <= 0) throw Error("mlp: batch size must be positive");
  if (batch.pixels.size() < static_cast<size_t>(B * config_.input_dim) || batch.targets.size() < static_cast<size_t>(B))
    throw Error("mlp: batch needs pixels (" + std::to_string(B) + ", " + std::to_string(config_.input_dim) +
                ") and targets (" + std::to_string(B) + ")");
  B_ = B;
  // (B, input_dim), where the kernels read it; the first layer's backward reads it again.
  const float* x = nn::staged_input(nn::backend_of(store_), batch.pixels.data(), size_t(B * config_.input_dim), pixels_);
  for (size_t i = 0; i < fc_.size(); ++i) {
    const float* h = fc_[i]->forward(x, B);  // (B, hidden[i]) pre-activation
    act_[i].ensure(B * config_.hidden[i]);
    nn::backend_of(store_).gelu_forward(act_[i].raw(), h, B * config_.hidden[i]);
    x = act_[i].raw();
  }
  const float* logits = head_.forward(x, B);  // (B, classes)
  ready_ = true;
  return xent_.forward(logits, batch.targets.data(), B, config_.classes);
}

void MlpClassifier::backward() {
  if (!ready_) throw Error("mlp: backward() called before forward()");
  ready_ = false;
  int64_t widest = 0;
  for (int64_t h : config_.hidden) widest = std::max(widest, h);
  for (auto& d : dbuf_) d.ensure(B_ * widest);
  float* dlogits = head_.output();  // in place over the logits
  xent_.backward(dlogits);
  if (fc_.empty()) {
    head_.backward(nullptr, dlogits);
    return;
  }
  int cur = 0;
  head_.backward(dbuf_[cur].raw(), dlogits);  // d act_.back()
  for (size_t k = fc_.size(); k-- > 0;) {
    float* dact = dbuf_[cur].raw();  // (B, hidden[k])
    // GELU backward needs the pre-activation, which fc_[k] still holds.
    nn::backend_of(store_).gelu_backward(dact, fc_[k]->output(), dact, B_ * config_.hidden[k]);
    fc_[k]->backward(k == 0 ? nullptr : dbuf_[1 - cur].raw(), dact);
    cur = 1 - cur;
  }
}

double MlpClassifier::flops_per_sample() const {
  double n = 0;
  for (const auto& fc : fc_) n += static_cast<double>(fc->in_features()) * fc->out_features();
  n += static_cast<double>(head_.in_features()) * head_.out_features();
  return 6.0 * n;
}

}  // namespace meshtrain
