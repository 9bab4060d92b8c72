#pragma once
// LARS (You et al., 2017): SGD with momentum whose step is scaled per view by
// a trust ratio. For a view with weight_decay=true:
//   trust = eta * ||w|| / (||g|| + wd * ||w||)   (1 when ||w|| or ||g|| is 0)
//   d = trust * (g + wd * w)
// Views with weight_decay=false (biases, norms) are excluded from adaptation
// and decay, as in common practice: trust = 1, d = g. Then, as torch SGD,
//   buf = momentum * buf + d;  d = nesterov ? d + momentum * buf : buf;  w -= lr * d
//
// Norms: each chunk's sum of squares lands in a slot of its own, then each
// view adds its chunks' slots in chunk order, so trust ratios do not depend on
// the thread count.
#include "meshtrain/optim/chunks.hpp"
#include "meshtrain/optim/config.hpp"
#include "meshtrain/optim/optimizer.hpp"

namespace meshtrain {

class Lars final : public Optimizer {
 public:
  // Expects a validated config (make_optimizer validates).
  // Owns `segments` of the store (make_optimizer passes the whole store
  // when there is no ZeRO shard).
  Lars(const ParamStore& store, std::span<const FlatSegment> segments, const OptimizerConfig& config);
  std::string name() const override { return enum_string(OptimizerKind::Lars); }
  void update(const UpdateBuffers& buffers, float lr) override;
  std::vector<std::pair<std::string, DeviceArray<float>*>> state_buffers() override;
  // Trust ratio of each view used by the last update() (1 for excluded views).
  const std::vector<double>& last_trust_ratios() const { return trust_; }

 private:
  double weight_decay_, eta_;
  float momentum_;
  bool nesterov_;
  DeviceArray<float> momentum_buffer_{memory_, MemoryKind::OptimizerState};  // (local_size), empty if momentum == 0
  std::vector<double> w_sq_, g_sq_;  // (chunks) partial sums of squares
  std::vector<double> view_sums_;    // (2 views): per view, sum of w^2 then of u^2 (LAMB) or g^2 (LARS)
  std::vector<char> decays_;         // (views) the view's weight_decay flag
  std::vector<double> trust_;        // (views)
};

}  // namespace meshtrain
