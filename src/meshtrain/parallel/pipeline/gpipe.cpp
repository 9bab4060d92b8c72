// GPipe (Huang et al., 2019): every micro-batch's forward, then every
// backward in the same order. Simple, but each rank holds all M micro-batches'
// activations at the turn; bubble (P-1)/(M+P-1).
#include "meshtrain/parallel/pipeline/schedule.hpp"

namespace meshtrain::parallel::pipeline {

Schedule gpipe_schedule(int P, int M) {
  std::vector<std::vector<Action>> compute(P);
  for (auto& order : compute) {
    for (int m = 0; m < M; ++m) order.push_back({ActionKind::Forward, m});
    for (int m = 0; m < M; ++m) order.push_back({ActionKind::Backward, m});
  }
  return with_communication(P, M, 1, std::move(compute));
}

}  // namespace meshtrain::parallel::pipeline
