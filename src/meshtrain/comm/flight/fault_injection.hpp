#pragma once
// A TESTING KNOB, not a feature: MESHTRAIN_FAULT makes one worker misbehave
// in one collective, the way the bugs that hang real jobs do, so that the
// flight recorder's diagnosis (hang_diagnosis.hpp) can be tested end to end
// (tests/integration/why_hung.sh). Never set it in a real job.
//
//   MESHTRAIN_FAULT="KIND:rank=R:step=S[:group=NAME][:op=OP]"
//
// At training step S (1-based), worker R (its global RANK) alters the first
// collective it submits (not a send or receive; of group NAME and operation
// OP when given: group "data", op "all_gather", ...):
//   skip_collective   it does not call it (no record, no sequence number)
//   other_collective  it calls a barrier in its place
//   size_mismatch     it calls it with half the bytes in every message
//   flip_bit          no collective: after step S's update it flips one bit
//                     of its parameters (silent data corruption, caught by
//                     training.check_replicas_every; take_flip_bit)
// Once per process. The variable is read once, where the worker opens its
// ring (flight_recorder.cpp); unset, the check in ProcessGroup's submit is
// one load of a false flag.
#include <string_view>

#include "meshtrain/comm/flight/flight_record.hpp"

namespace meshtrain::comm::flight {

enum class Fault : unsigned char { None, Skip, OtherCollective, SizeMismatch, FlipBit };

namespace detail {
inline bool fault_armed = false;
}

inline bool fault_armed() { return detail::fault_armed; }

// Parses MESHTRAIN_FAULT for the worker of global rank `rank`; arms the
// fault when it names this rank. Throws ConfigError for a value it cannot
// parse (a test's mistake should not pass silently).
void arm_fault_from_environment(int rank);
// The fault for a collective of group `group` about to be submitted at the
// current step, consumed once it fires; Fault::None for every other.
Fault take_fault(std::string_view group, Op op);
// Whether to flip a parameter bit now, at the end of training step `step`
// (1-based); true once.
bool take_flip_bit(int64_t step);

}  // namespace meshtrain::comm::flight
