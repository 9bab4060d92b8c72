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
// Two passes and no buffer for u: pass 1 updates m, v and the per-chunk
// partial norms of w and u; pass 2 recomputes u from m, v, w (same
// expression) and applies it. Per-view norms add chunk partials in chunk order.
#include "meshtrain/optim/chunks.hpp"
#include "meshtrain/optim/config.hpp"
#include "meshtrain/optim/optimizer.hpp"

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
  std::vector<double> w_sq_, u_sq_;  // (chunks) partial sums of squares
  std::vector<double> view_sums_;    // (2 views): per view, sum of w^2 then of u^2 (LAMB) or g^2 (LARS)
  std::vector<char> decays_;         // (views) the view's weight_decay flag
  std::vector<double> trust_;        // (views)
};

}  // namespace meshtrain
