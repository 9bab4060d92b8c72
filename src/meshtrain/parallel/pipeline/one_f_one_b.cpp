// 1F1B (PipeDream-Flush, Narayanan et al., 2021; Megatron's default).
//
// Rank r runs `warmup` = min(P-1-r, M) forwards, then alternates one forward
// and one backward (the steady state), then drains the remaining backwards
// (the cool-down). A backward frees a micro-batch's activations as soon as
// possible, so rank r holds at most P-r micro-batches instead of GPipe's M,
// for the same bubble (P-1)/(M+P-1).
#include "meshtrain/parallel/pipeline/schedule.hpp"

#include <algorithm>

namespace meshtrain::parallel::pipeline {

Schedule one_f_one_b_schedule(int P, int M) {
  std::vector<std::vector<Action>> compute(P);
  for (int r = 0; r < P; ++r) {
    const int warmup = std::min(P - 1 - r, M);
    std::vector<Action>& order = compute[r];
    for (int m = 0; m < warmup; ++m) order.push_back({ActionKind::Forward, m});
    for (int m = 0; m < M; ++m) {  // m: the micro-batch whose backward comes next
      if (m + warmup < M) order.push_back({ActionKind::Forward, m + warmup});
      order.push_back({ActionKind::Backward, m});
    }
  }
  return with_communication(P, M, 1, std::move(compute));
}

}  // namespace meshtrain::parallel::pipeline
