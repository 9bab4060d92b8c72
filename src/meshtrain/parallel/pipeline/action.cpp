#include "meshtrain/parallel/pipeline/action.hpp"

namespace meshtrain::parallel::pipeline {

int peer_stage(const Schedule& schedule, int rank, const Action& action) {
  const int stage = schedule.stage_of(rank, action.chunk);
  const bool downstream = action.kind == ActionKind::SendActivation || action.kind == ActionKind::RecvGradient;
  return downstream ? stage + 1 : stage - 1;
}

std::string describe(const Action& action) {
  return enum_string(action.kind) + "(micro-batch " + std::to_string(action.micro_batch) + ", chunk " +
         std::to_string(action.chunk) + ")";
}

}  // namespace meshtrain::parallel::pipeline
