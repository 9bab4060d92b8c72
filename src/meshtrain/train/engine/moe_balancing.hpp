#pragma once
// The mixture-of-experts layers' part of a step (nn/moe/): their routing
// sums start empty before the step's first forward; after the last backward
// they are summed over the data ranks, which makes them the global batch's
// under any data, expert or pipeline layout and any micro-batching
// (router_sums.hpp); from them each router weight gets the load-balancing
// loss's gradient, added to what the rank holds of it before the norm and
// clipping; after the update each router's auxiliary-loss-free bias moves.
// The report (per-expert load, drops, the balancing loss and the z-loss of
// every MoE layer) is gathered over the pipeline stages, so the lead sees
// the whole model's.
//
// The step's reported loss stays the language model's (comparable with a
// dense model's); the two router losses are reported beside it.
#include <cstdint>
#include <vector>

#include "meshtrain/nn/gpt.hpp"
#include "meshtrain/nn/model.hpp"
#include "meshtrain/parallel/parallel_context.hpp"
#include "meshtrain/train/engine/gradient_reduction.hpp"

namespace meshtrain {

struct MoeLayerReport {
  int64_t layer = 0;          // the block
  std::vector<double> load;   // tokens routed to each expert (choices, before drops)
  double tokens = 0, dropped = 0;
  double aux_loss = 0;        // the balancing loss (with its coefficient)
  double z_loss = 0;          // the router z-loss (with its coefficient)
};

class MoeBalancing {
 public:
  // Finds the model's MoE layers; a dense model (or another kind) has none
  // and every call below does nothing.
  MoeBalancing(Model& model, parallel::ParallelContext& workers);

  bool active() const { return model_ != nullptr; }
  void begin_step();
  // After the reduction and the 1/M scale, before the norm.
  void add_balancing_gradients(const HeldGradients& held);
  void after_update();
  // Every MoE layer of the model, in layer order (the same on every rank;
  // a collective over the pipeline stages).
  std::vector<MoeLayerReport> report();

 private:
  Gpt* model_ = nullptr;
  parallel::ParallelContext& workers_;
  std::vector<int64_t> all_layers_;  // the whole model's MoE blocks
  std::vector<float> dw_;
  AlignedBuffer<float> staged_{MemoryKind::Communication};  // off the CPU: a router gradient's host copy
};

}  // namespace meshtrain
