// Megatron's interleaved 1F1B (Narayanan et al., 2021): each rank holds V
// model chunks (virtual stages r, P+r, 2P+r, ...), so a micro-batch crosses
// every rank V times and the warm-up and cool-down shrink V-fold: bubble
// (P-1)/(V*M+P-1) when every chunk costs the same.
//
// Terms. A rank runs V*M forward "units" k = 0, 1, ... in groups of P*V:
// within a group, P consecutive micro-batches go through chunk 0, then the
// same P through chunk 1, and so on. Backward units walk the chunks in
// reverse. Micro-batches therefore must come in whole groups of P (M % P == 0,
// as Megatron requires; make_schedule checks).
//   chunk(k)       = (k % (P*V)) / P           (backward: V-1 - that)
//   micro_batch(k) = (k / (P*V)) * P + k % P
// Rank r warms up with (P-1-r)*2 + (V-1)*P forward units (all of them if
// fewer), then alternates one forward and one backward unit, then drains.
#include "meshtrain/parallel/pipeline/schedule.hpp"

#include <algorithm>

namespace meshtrain::parallel::pipeline {
namespace {

Action unit(ActionKind kind, int k, int P, int V) {
  const int group = P * V;
  int chunk = (k % group) / P;
  if (kind != ActionKind::Forward) chunk = V - 1 - chunk;
  return {kind, (k / group) * P + k % P, chunk};
}

}  // namespace

Schedule interleaved_schedule(int P, int M, int V) {
  const int units = M * V;
  std::vector<std::vector<Action>> compute(P);
  for (int r = 0; r < P; ++r) {
    const int warmup = std::min((P - 1 - r) * 2 + (V - 1) * P, units);
    std::vector<Action>& order = compute[r];
    for (int k = 0; k < warmup; ++k) order.push_back(unit(ActionKind::Forward, k, P, V));
    for (int k = 0; k < units; ++k) {  // k: the backward unit that comes next
      if (k + warmup < units) order.push_back(unit(ActionKind::Forward, k + warmup, P, V));
      order.push_back(unit(ActionKind::Backward, k, P, V));
    }
  }
  return with_communication(P, M, V, std::move(compute));
}

}  // namespace meshtrain::parallel::pipeline
