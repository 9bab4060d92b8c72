#pragma once
// LARS (You et al., 2017): SGD with momentum whose step is scaled per view by
// a trust ratio. For a view with weight_decay=true:
//   trust = eta * ||w|| / (||g|| + wd * ||w||)   (1 when ||w|| or ||g|| is 0)
//   d = trust * (g + wd * w)
// Views with weight_decay=false (biases, norms) are excluded from adaptation
// and decay, as in common practice: trust = 1, d = g. Then, as torch SGD,
//   buf = momentum * buf + d;  d = nesterov ? d + momentum * buf : buf;  w -= lr * d
//
// Norms: the backend sums each chunk's squares (kernels/momentum.hpp), then
// each view adds its chunks' sums in chunk order (view_sums.hpp), so trust
// ratios depend on neither the thread count nor the device. The element step
// is SGD's (kernels/momentum_math.hpp) with the view's trust ratio.
#include <vector>

#include "meshtrain/kernels/momentum_math.hpp"
#include "meshtrain/optim/chunks.hpp"
#include "meshtrain/optim/config.hpp"
#include "meshtrain/optim/optimizer.hpp"
#include "meshtrain/optim/view_sums.hpp"

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
  std::vector<kernels::MomentumChunk> batch_;  // update(): rebuilt each step (ZeRO moves the buffers)
  std::vector<double> chunk_sums_;             // (2 chunks): each chunk's sums of w^2, then of g^2
  ViewSums view_sums_;
  std::vector<double> trust_;        // (views)
  std::vector<float> trust_floats_;  // (views) as the update multiplies by them
};

}  // namespace meshtrain
