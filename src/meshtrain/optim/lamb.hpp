#pragma once
// LAMB (You et al., 2019): Adam moments, then a per-view trust ratio.
// With t = steps_taken() + 1:
//   m = beta1 * m + (1 - beta1) * g      v = beta2 * v + (1 - beta2) * g^2
//   u = (m / (1 - beta1^t)) / (sqrt(v) / sqrt(1 - beta2^t) + eps) + wd * w
//   trust = ||w|| / ||u||   (1 when either norm is 0)
//   w -= lr * trust * u
// Views with weight_decay=false take no decay and trust = 1, as in apex
// FusedLAMB and timm (adaptation only where weight decay applies). No clamp
// on the trust ratio.
//
// Two passes and no buffer for u, through the store's device's backend
// (kernels/lamb.hpp): pass 1 updates m, v and each chunk's sums of squares
// of w and u; pass 2 recomputes u from m, v, w (same expression) and
// applies it. Per-view norms add the chunks' sums in chunk order
// (view_sums.hpp), so they depend on neither the thread count nor the device.
#include <vector>

#include "meshtrain/kernels/lamb_math.hpp"
#include "meshtrain/optim/chunks.hpp"
#include "meshtrain/optim/config.hpp"
#include "meshtrain/optim/optimizer.hpp"
#include "meshtrain/optim/view_sums.hpp"

namespace meshtrain {

class Lamb final : public Optimizer {
 public:
  // Expects a validated config (make_optimizer validates).
  // Owns `segments` of the store (make_optimizer passes the whole store
  // when there is no ZeRO shard).
  Lamb(const ParamStore& store, std::span<const FlatSegment> segments, const OptimizerConfig& config);
  std::string name() const override { return enum_string(OptimizerKind::Lamb); }
  void update(const UpdateBuffers& buffers, float lr) override;
  std::vector<std::pair<std::string, DeviceArray<float>*>> state_buffers() override;
  // Trust ratio of each view used by the last update() (1 for excluded views).
  const std::vector<double>& last_trust_ratios() const { return trust_; }

 private:
  double weight_decay_, beta1_, beta2_, eps_;
  DeviceArray<float> exp_avg_{memory_, MemoryKind::OptimizerState};     // m (local_size)
  DeviceArray<float> exp_avg_sq_{memory_, MemoryKind::OptimizerState};  // v (local_size)
  std::vector<kernels::LambChunk> batch_;  // update(): rebuilt each step (ZeRO moves the buffers)
  std::vector<double> chunk_sums_;        // (2 chunks): each chunk's sums of w^2, then of u^2
  ViewSums view_sums_;
  std::vector<double> trust_;   // (views)
  std::vector<float> scales_;   // (views) lr * trust, as the update multiplies by them
};

}  // namespace meshtrain
