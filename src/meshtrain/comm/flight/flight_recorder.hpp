#pragma once
// The flight recorder: every worker's always-on ring of its recent
// collectives and point-to-point operations, in a memory-mapped file under
// the run directory (flight_record.hpp has the format), so that when a job
// hangs, the supervisor or `meshtrain why-hung` can read every rank's ring
// (hang_diagnosis.hpp) and name the rank the others wait for.
//
// One ring per process, opened once (open_worker_ring, from the training
// loop's start); until then, and in a process that never opens one, every
// call here is a no-op behind one branch. Recording an operation is plain
// stores into the mapping, one atomic add and a clock read per state change:
// no system call, no lock, no allocation. The kernel keeps the pages in its
// page cache, so a ring outlives its process, SIGKILL included.
//
// process_group.cpp records every operation of a ProcessGroup where it is
// submitted (the per-group sequence numbers live there); the training loop
// says which step and phase it is in (set_phase).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "meshtrain/comm/flight/flight_record.hpp"

namespace meshtrain::comm::flight {

// One operation as it is scheduled: a collective is one entry, an exchange
// of point-to-point messages one entry per send and receive.
struct Entry {
  Op op = Op::None;
  uint8_t algorithm = 0;
  int32_t peer = -1;
  uint64_t seq = 0;
  uint64_t bytes = 0;
};

// The records of one scheduled operation, for its state changes; empty when
// nothing is recorded.
struct Slot {
  uint64_t first = 0;  // history index of the first record
  uint32_t count = 0;
  explicit operator bool() const { return count > 0; }
};

// Opens <dir>/worker-<rank>.ring for this process (created afresh; the
// directory too), for a world of `world` ranks, unless one is open already.
// Returns false, having said why on stderr, when the file cannot be made:
// the job runs on without a recorder.
bool open_ring(const std::string& dir, int rank, int world, const std::string& job_id,
               uint32_t capacity = kDefaultCapacity);
// The training worker's ring: <out_dir>/flight/worker-<RANK>.ring, with the
// rank, world and job id from the launch environment (comm/bootstrap). A
// lone process (world 1) records nothing, nor one started with
// MESHTRAIN_FLIGHT_RECORDER=0 (to measure what recording costs).
void open_worker_ring(const std::string& out_dir);
// Marks the ring closed (the process is on its way out) and stops recording.
// Runs by itself at exit.
void close_ring();
bool recording();
// The path of the open ring; empty when none.
std::string ring_path();

// A group's index in the ring's header, for its records: the same name and
// members on every rank make the same group. kNoGroup when no ring is open or
// the header is full.
uint16_t register_group(std::string_view name, std::span<const int> members, int group_rank);

// Writes the operation's records as scheduled, at the current step and phase.
Slot schedule(uint16_t group, std::span<const Entry> entries);
void started(const Slot& slot);
void finished(const Slot& slot, bool ok);

// The training loop's step (1-based: the one running) and phase. Called a
// few times per step: a few stores and a clock read.
void set_phase(int64_t step, Phase phase);
void set_phase(Phase phase);  // the step unchanged
int64_t current_step();

// CLOCK_REALTIME in nanoseconds, the recorder's clock.
int64_t now_ns();

}  // namespace meshtrain::comm::flight
