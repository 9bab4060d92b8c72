#include "meshtrain/parallel/pipeline/schedule.hpp"

#include <string>

#include "meshtrain/core/error.hpp"

namespace meshtrain::parallel::pipeline {

Schedule make_schedule(ScheduleKind kind, int P, int M, int V) {
  const std::string name = "pipeline schedule " + enum_string(kind) + ": ";
  auto fail = [&](const std::string& why) { throw ConfigError(name + why); };
  if (P < 1) fail("pipeline ranks must be >= 1, got " + std::to_string(P));
  if (M < 1) fail("micro-batches must be >= 1, got " + std::to_string(M));
  if (V < 1) fail("virtual stages per rank must be >= 1, got " + std::to_string(V));
  if (kind != ScheduleKind::Interleaved && V != 1)
    fail("takes 1 virtual stage per rank, got " + std::to_string(V) + " (only interleaved runs several)");
  switch (kind) {
    case ScheduleKind::GPipe: return gpipe_schedule(P, M);
    case ScheduleKind::OneFOneB: return one_f_one_b_schedule(P, M);
    case ScheduleKind::ZeroBubble: return zero_bubble_schedule(P, M);
    case ScheduleKind::Interleaved:
      // Megatron's order walks micro-batches in groups of P per chunk.
      if (P < 2) fail("needs at least 2 pipeline ranks, got " + std::to_string(P));
      if (M % P != 0)
        fail("micro-batches (" + std::to_string(M) + ") must be a multiple of the pipeline ranks (" +
             std::to_string(P) + ")");
      return interleaved_schedule(P, M, V);
  }
  fail("unknown schedule kind");
  return {};
}

}  // namespace meshtrain::parallel::pipeline
