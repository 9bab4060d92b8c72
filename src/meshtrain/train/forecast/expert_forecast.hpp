#pragma once
// The mixture-of-experts part of `meshtrain plan --config` (job_forecast.hpp):
// what the probe's routing says each MoE layer moves, and what that costs.
//
// Every rank is taken to route as the probe's model did (its router's last
// forward, the kept choices per expert; the router as the job initializes
// it: the probe's updates are too small to move it). Per
// MoE layer, in rows per token of a rank's micro-batch, with X expert ranks
// and s_r the share of the rank's (token, choice) pairs that go to rank r's
// experts (kept ones: drops under a capacity taken out):
//   received   X max_r s_r       the busiest expert rank's rows, which its
//                                experts compute (X = 1: k)
//   remote     max((X-1) max_r s_r, k - max_r s_r)
//                                what the busiest rank receives from, or
//                                sends to, the others: the larger sets the
//                                all-to-all's time
// Balanced routing gives received = k and remote = k (X-1)/X.
#include <cstdint>
#include <vector>

#include "meshtrain/comm/collectives/cost_model.hpp"
#include "meshtrain/nn/model.hpp"
#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain {

struct ExpertLayerTraffic {
  double received = 0, remote = 0;  // rows per token, as above
  double even = 0;                  // received under balanced routing: the kept choices per token
  size_t sums = 0;                  // the layer's routing sums (doubles), reduced over the data ways each step
};

// The MoE layers of `models` (a job's pipeline stages, or its one model),
// each from its router's counts; a layer the probe never routed through
// counts as balanced. Empty for a dense model.
std::vector<ExpertLayerTraffic> expert_traffic(const std::vector<Model*>& models, const ModelSection& model,
                                               int expert_ways);

// The busiest expert rank's rows over an even share, over the layers (1: balanced).
double routing_imbalance(const std::vector<ExpertLayerTraffic>& layers);

// Seconds and bytes sent per rank per step of the expert axis's exchanges,
// all on the critical path: per layer and micro-batch of `rows` tokens of
// width C, a fixed all-to-all of the row counts and 2 row all-to-alls
// forward (dispatch, return), 2 backward, over `expert_ways` ranks on
// `links` (all-to-all of B bytes per rank: alpha + (X-1)/X B beta,
// B = X/(X-1) x remote rows x C values of `value_bytes` each: 4, or 2 with
// bf16 on the wire).
struct ExpertComm {
  double seconds = 0, bytes = 0;
};
ExpertComm expert_all_to_all_comm(const std::vector<ExpertLayerTraffic>& layers, int64_t rows, int64_t C,
                                  int64_t n_expert, int expert_ways, int64_t micro_batches,
                                  const comm::CostTable& links, size_t value_bytes = sizeof(float));

}  // namespace meshtrain
