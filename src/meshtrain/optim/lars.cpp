#include "meshtrain/optim/lars.hpp"

#include <cmath>

#include "meshtrain/optim/sgd.hpp"

namespace meshtrain {

Lars::Lars(const ParamStore& store, std::span<const FlatSegment> segments, const OptimizerConfig& config)
    : Optimizer(store, segments),
      weight_decay_(config.weight_decay),
      eta_(config.trust_coefficient),
      momentum_(float(config.momentum)),
      nesterov_(config.nesterov),
      chunk_sums_(2 * chunks_.size()),
      view_sums_(store),
      trust_(store.views().size(), 1.0),
      trust_floats_(store.views().size(), 1.0f) {
  if (momentum_ != 0.0f) momentum_buffer_.resize(local_size());
  batch_.reserve(chunks_.size());
}

void Lars::update(const UpdateBuffers& buffers, float lr) {
  momentum_chunks(chunks_, buffers, momentum_buffer_.size() ? momentum_buffer_.raw() : nullptr, batch_);
  // The norms of the views that adapt, summed over the ranks where sharded.
  backend_.momentum_squares(batch_, chunk_sums_.data());
  const std::span<double> sums = view_sums_.add(chunks_, chunk_sums_);
  reduce_view_sums(sums);
  for (size_t v = 0; v < trust_.size(); ++v) {
    trust_[v] = 1.0;
    const double w_norm = std::sqrt(sums[2 * v]), g_norm = std::sqrt(sums[2 * v + 1]);
    if (view_sums_.decays(v) && w_norm > 0 && g_norm > 0) trust_[v] = eta_ * w_norm / (g_norm + weight_decay_ * w_norm);
    trust_floats_[v] = float(trust_[v]);
  }
  backend_.momentum_update(
      batch_, trust_floats_,
      {.lr = lr, .momentum = momentum_, .weight_decay = float(weight_decay_), .nesterov = nesterov_});
  ++steps_;
}

std::vector<std::pair<std::string, DeviceArray<float>*>> Lars::state_buffers() {
  if (momentum_buffer_.size() == 0) return {};
  return {{"momentum_buffer", &momentum_buffer_}};
}

}  // namespace meshtrain
