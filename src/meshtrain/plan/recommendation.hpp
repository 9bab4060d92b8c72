#pragma once
// The strategy the planner recommends, by the notes' rules:
//   - many preemptible workers and a sparse model: async parameter servers;
//   - the model fits on one device: one device if that meets the goal, else
//     synchronous data parallelism, one node first; across nodes, the
//     Reduction Server when the ring's gradient exchange is at least a
//     quarter of the compute and the Reduction Server saves 5% of the step;
//   - it does not fit: expert parallelism for MoE models; else sharded data
//     parallelism at the lowest ZeRO stage that fits, unless a tensor /
//     pipeline / data layout is more than 1.25x faster; from 20B parameters
//     ("tens to hundreds of billions") the other way round: the tensor /
//     pipeline / data layout unless sharding is more than 1.25x faster;
//   - nothing fits: the smallest cluster of this device on which something does.
#include <optional>
#include <string>
#include <vector>

#include "meshtrain/plan/plan_input.hpp"
#include "meshtrain/plan/strategy_estimate.hpp"

namespace meshtrain::plan {

struct SmallestFit {
  int devices_per_node = 0, nodes = 0;
  StrategyEstimate strategy;
};

struct Recommendation {
  std::optional<StrategyKind> strategy;  // nullopt: nothing fits
  std::string reason;  // one or two sentences with the numbers
  // Data-parallel devices (this device, this node size) that meet the
  // target time; 0 when there is no target or no amount of training.
  int devices_for_target = 0;
  bool has_smallest_fit = false;
  SmallestFit smallest_fit;  // when nothing fits on the cluster given

  std::string key() const { return strategy ? enum_string(*strategy) : "none"; }  // for --json and people
  // The recommended strategy's estimate in `all`; null when nothing fits.
  const StrategyEstimate* estimate(const std::vector<StrategyEstimate>& all) const;
};

Recommendation recommend(const PlanInput& input, const std::vector<StrategyEstimate>& estimates);

// Formatting shared with the report: "12.3 GB" (MB below a GB), "4.56 s", "1.43 days".
std::string format_gb(double bytes);
std::string format_seconds(double seconds);
std::string format_days(double seconds);

}  // namespace meshtrain::plan
