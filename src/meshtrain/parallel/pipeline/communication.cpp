// with_communication (schedule.hpp): the sends and receives around each
// rank's compute order.
#include <utility>

#include "meshtrain/parallel/pipeline/schedule.hpp"

namespace meshtrain::parallel::pipeline {

Schedule with_communication(int P, int M, int V, std::vector<std::vector<Action>> compute) {
  Schedule schedule{P, M, V, {}};
  schedule.actions.resize(P);
  const int last = schedule.stages() - 1;
  for (int r = 0; r < P; ++r) {
    std::vector<Action>& out = schedule.actions[r];
    for (const Action& a : compute[r]) {
      const int s = schedule.stage_of(r, a.chunk);
      const bool backward = a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardInput;
      if (a.kind == ActionKind::Forward && s > 0) out.push_back({ActionKind::RecvActivation, a.micro_batch, a.chunk});
      if (backward && s < last) out.push_back({ActionKind::RecvGradient, a.micro_batch, a.chunk});
      out.push_back(a);
      if (a.kind == ActionKind::Forward && s < last) out.push_back({ActionKind::SendActivation, a.micro_batch, a.chunk});
      if (backward && s > 0) out.push_back({ActionKind::SendGradient, a.micro_batch, a.chunk});
    }
  }
  return schedule;
}

}  // namespace meshtrain::parallel::pipeline
