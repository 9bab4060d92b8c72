#pragma once
// SGD with momentum (dampening 0), optional Nesterov and coupled L2 weight
// decay, following torch.optim.SGD:
//   d = g + wd * w                      (wd only on views with weight_decay)
//   buf = momentum * buf + d            (buf starts at 0, so step 1 gives buf = d)
//   d = nesterov ? d + momentum * buf : buf
//   w -= lr * d
// The element step is kernels/momentum_math.hpp's, through the store's
// device's backend.
#include <vector>

#include "meshtrain/kernels/momentum_math.hpp"
#include "meshtrain/optim/chunks.hpp"
#include "meshtrain/optim/config.hpp"
#include "meshtrain/optim/optimizer.hpp"

namespace meshtrain {

// SGD's and LARS's chunks as the backend reads them: `out` = each chunk of
// `chunks` resolved to its parameters, gradients and momentum buffer's run
// (momentum: the buffer, or null without one).
void momentum_chunks(const UpdateChunks& chunks, const UpdateBuffers& buffers, float* momentum,
                     std::vector<kernels::MomentumChunk>& out);

class Sgd final : public Optimizer {
 public:
  // Expects a validated config (make_optimizer validates).
  // Owns `segments` of the store (make_optimizer passes the whole store
  // when there is no ZeRO shard).
  Sgd(const ParamStore& store, std::span<const FlatSegment> segments, const OptimizerConfig& config);
  std::string name() const override { return enum_string(OptimizerKind::Sgd); }
  void update(const UpdateBuffers& buffers, float lr) override;
  std::vector<std::pair<std::string, DeviceArray<float>*>> state_buffers() override;

 private:
  float weight_decay_, momentum_;
  bool nesterov_;
  std::vector<kernels::MomentumChunk> batch_;  // update(): rebuilt each step (ZeRO moves the buffers)
  DeviceArray<float> momentum_buffer_{memory_, MemoryKind::OptimizerState};  // (local_size), empty if momentum == 0
};

}  // namespace meshtrain
