#pragma once
// The pipeline schedules meshtrain knows and the one door that builds them
// with their arguments checked. Each generator lives in its own file.
#include <span>

#include "meshtrain/core/enum_names.hpp"
#include "meshtrain/parallel/pipeline/action.hpp"

namespace meshtrain::parallel::pipeline {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved, ZeroBubble };
inline constexpr EnumName<ScheduleKind> kScheduleKindNames[] = {
    {ScheduleKind::GPipe, "gpipe"},
    {ScheduleKind::OneFOneB, "1f1b"},
    {ScheduleKind::Interleaved, "interleaved"},
    {ScheduleKind::ZeroBubble, "zero_bubble"},
};
constexpr std::span<const EnumName<ScheduleKind>> enum_names(ScheduleKind) { return kScheduleKindNames; }

// The schedule of `kind` for P ranks, M micro-batches and V chunks per rank.
// Throws ConfigError for M < 1, P < 1, V < 1, V > 1 for a schedule other than
// interleaved, and for interleaved P < 2 or M not a multiple of P.
Schedule make_schedule(ScheduleKind kind, int P, int M, int V = 1);

// The generators, for arguments make_schedule has checked.
Schedule gpipe_schedule(int P, int M);                    // gpipe.cpp
Schedule one_f_one_b_schedule(int P, int M);              // one_f_one_b.cpp
Schedule interleaved_schedule(int P, int M, int V);       // interleaved.cpp
Schedule zero_bubble_schedule(int P, int M);              // zero_bubble.cpp

// Builds a Schedule from each rank's compute order (Forward, Backward,
// BackwardInput, BackwardWeight) by adding the sends and receives: each
// receive right before the compute that consumes it, each send right after
// the compute that produced it (action.hpp on why that order).
Schedule with_communication(int P, int M, int V, std::vector<std::vector<Action>> compute);

}  // namespace meshtrain::parallel::pipeline
