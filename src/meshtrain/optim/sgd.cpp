#include "meshtrain/optim/sgd.hpp"

namespace meshtrain {

void momentum_chunks(const UpdateChunks& chunks, const UpdateBuffers& buffers, float* momentum,
                     std::vector<kernels::MomentumChunk>& out) {
  out.clear();
  for (const UpdateChunk& ch : chunks.chunks)
    out.push_back({.param = buffers.params_of(ch),
                   .grad = buffers.grads_of(ch),
                   .momentum = momentum ? momentum + ch.local : nullptr,
                   .size = int64_t(ch.size),
                   .decays = ch.weight_decay ? 1 : 0,
                   .view = int32_t(ch.view)});
}

Sgd::Sgd(const ParamStore& store, std::span<const FlatSegment> segments, const OptimizerConfig& config)
    : Optimizer(store, segments),
      weight_decay_(float(config.weight_decay)),
      momentum_(float(config.momentum)),
      nesterov_(config.nesterov) {
  if (momentum_ != 0.0f) momentum_buffer_.resize(local_size());
  batch_.reserve(chunks_.size());
}

void Sgd::update(const UpdateBuffers& buffers, float lr) {
  momentum_chunks(chunks_, buffers, momentum_buffer_.size() ? momentum_buffer_.raw() : nullptr, batch_);
  backend_.momentum_update(batch_, {},
                           {.lr = lr, .momentum = momentum_, .weight_decay = weight_decay_, .nesterov = nesterov_});
  ++steps_;
}

std::vector<std::pair<std::string, DeviceArray<float>*>> Sgd::state_buffers() {
  if (momentum_buffer_.size() == 0) return {};
  return {{"momentum_buffer", &momentum_buffer_}};
}

}  // namespace meshtrain
