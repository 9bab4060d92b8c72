#pragma once
// Estimates of every strategy for one PlanInput: memory per device by kind
// (ZeRO's formulas, Korthikanti's activations), whether it fits, the bytes
// each device sends per step, and the step time:
//   compute  = global batch x FLOPs per sample / (devices x peak x MFU),
//              divided by 1 - (p-1)/(m+p-1) for a pipeline of p stages and
//              m micro-batches (its bubble)
//   comm     = the alpha-beta time of the step's collectives (link_time.hpp),
//              less the share `overlap` of what fits under backward for
//              the gradient exchange that runs during backward
//   step     = compute + comm
// Each strategy takes the largest micro-batch (a power-of-two fraction of
// its replica's batch, the rest by gradient accumulation) that fits without
// recomputation, else with it; a pipeline takes micro-batches of 1 for the
// smallest bubble.
#include <vector>

#include "meshtrain/plan/plan_input.hpp"
#include "meshtrain/plan/strategy_estimate.hpp"

namespace meshtrain::plan {

// How much training there is: from the token budget, or from the
// single-device time at the MFU; with both, the MFU follows from them.
struct TrainingAmount {
  double samples = 0;  // 0: unknown
  double steps = 0;
  double mfu = 0;
  bool mfu_from_single_device = false;
};

TrainingAmount training_amount(const PlanInput& input);

// How much slower the Reduction Server's transfers run than the workers'
// links allow, with hardware.reducers reducer nodes: nodes x node bandwidth
// / (reducers x reducer bandwidth), at least 1 (1 when reducers = 0: as
// many as needed).
double reducer_slowdown(const Cluster& cluster);

StrategyEstimate evaluate_strategy(const PlanInput& input, StrategyKind kind);
// Every strategy, in StrategyKind's order; expert parallelism only for MoE models.
std::vector<StrategyEstimate> evaluate_strategies(const PlanInput& input);

}  // namespace meshtrain::plan
