#pragma once
// AdamW with decoupled weight decay, as torch.optim.AdamW (amsgrad off),
// with t = steps_taken() + 1:
//   w *= 1 - lr * wd                    (only views with weight_decay)
//   m = lerp(m, g, 1 - beta1)           v = beta2 * v + (1 - beta2) * g^2
//   denom = sqrt(v) / sqrt(1 - beta2^t) + eps
//   w -= lr / (1 - beta1^t) * m / denom
// Scalars are formed in double and rounded to float once, elementwise math is
// float, as PyTorch does for fp32 tensors.
#include "meshtrain/optim/chunks.hpp"
#include "meshtrain/optim/config.hpp"
#include "meshtrain/optim/optimizer.hpp"

namespace meshtrain {

class AdamW final : public Optimizer {
 public:
  // Expects a validated config (make_optimizer validates).
  // Owns `segments` of the store (make_optimizer passes the whole store
  // when there is no ZeRO shard).
  AdamW(const ParamStore& store, std::span<const FlatSegment> segments, const OptimizerConfig& config);
  std::string name() const override { return enum_string(OptimizerKind::AdamW); }
  void update(const UpdateBuffers& buffers, float lr) override;
  std::vector<std::pair<std::string, DeviceArray<float>*>> state_buffers() override;

 private:
  double weight_decay_, beta1_, beta2_, eps_;
  // update(): the chunks' pointers, rebuilt each step (ZeRO moves the buffers).
  std::vector<kernels::AdamWChunk> batch_;
  DeviceArray<float> exp_avg_{memory_, MemoryKind::OptimizerState};     // m (local_size)
  DeviceArray<float> exp_avg_sq_{memory_, MemoryKind::OptimizerState};  // v (local_size)
};

}  // namespace meshtrain
