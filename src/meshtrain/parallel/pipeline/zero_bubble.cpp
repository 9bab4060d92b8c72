// ZB-H1 (Qi et al., 2023, "Zero Bubble Pipeline Parallelism"): 1F1B with
// each backward split into B (input gradient, on the critical path between
// stages) and W (weight gradient, needed by nobody downstream).
//
// Forwards and B's keep 1F1B's order, so a rank holds as many micro-batches'
// activations as in 1F1B. W's fill the cool-down: the last micro-batch's B
// walks from rank P-1 down to rank 0, one B per hop, so rank r is done with
// its last B r hops before rank 0 is. Rank r therefore keeps r W's in hand
// (W of micro-batch m runs right after B of micro-batch m + r) and ends with
// r+1 W's while rank 0 ends with one. With F = B = W every rank is busy from
// its first backward to the end: bubble (P-1)/(3M+P-1) for M >= P, about a
// third of 1F1B's. Other costs keep the order; the bubble then lies between.
#include "meshtrain/parallel/pipeline/schedule.hpp"

#include <algorithm>

namespace meshtrain::parallel::pipeline {

Schedule zero_bubble_schedule(int P, int M) {
  std::vector<std::vector<Action>> compute(P);
  for (int r = 0; r < P; ++r) {
    const int warmup = std::min(P - 1 - r, M);
    const int lag = r;  // W of micro-batch m follows B of micro-batch m + lag
    std::vector<Action>& order = compute[r];
    for (int m = 0; m < warmup; ++m) order.push_back({ActionKind::Forward, m});
    for (int m = 0; m < M; ++m) {
      if (m + warmup < M) order.push_back({ActionKind::Forward, m + warmup});
      order.push_back({ActionKind::BackwardInput, m});
      if (m - lag >= 0) order.push_back({ActionKind::BackwardWeight, m - lag});
    }
    for (int m = std::max(0, M - lag); m < M; ++m) order.push_back({ActionKind::BackwardWeight, m});
  }
  return with_communication(P, M, 1, std::move(compute));
}

}  // namespace meshtrain::parallel::pipeline
