#pragma once
// The flight recorder's file (flight_recorder.hpp writes it, flight_reader.hpp
// reads it): <training.out_dir>/flight/worker-<rank>.ring, one per worker,
// memory-mapped by its writer. A Header (kHeaderBytes, padded) and then a
// ring of `capacity` Records, all plain old data in the host's byte order.
//
// Record i of the ring's history (0, 1, 2, ...) sits in slot i % capacity and
// carries stamp = i + 1 once it is whole; a writer clears the stamp first, so
// a reader skips a record caught half written (and one whose stamp does not
// match its slot). The header's write_index counts the records ever begun.
// A record's state moves scheduled -> started -> completed (or failed) in
// place, by plain stores; a reader may see either side of a change.
//
// Sequence numbers, as NCCL's flight recorder keeps them: every collective of
// a process group gets the next number of that group (1, 2, ...), the same on
// every member when all call the same collectives in the same order
// (communicator.hpp). Point-to-point operations count per peer and direction:
// the n-th send from A to B meets the n-th receive at B from A. A group is
// known across ranks by its name and the hash of its members.
#include <cstdint>
#include <string_view>

namespace meshtrain::comm::flight {

inline constexpr char kMagic[8] = {'M', 'T', 'F', 'L', 'I', 'G', 'H', 'T'};
inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kHeaderBytes = 8192;
inline constexpr uint32_t kMaxGroups = 16;
inline constexpr uint32_t kMaxMembers = 64;          // members listed in the header; more are known by hash
inline constexpr uint32_t kDefaultCapacity = 8192;   // records: ~100 steps of a small model's collectives
inline constexpr uint16_t kNoGroup = 0xffff;         // a group the header had no room for

enum class Op : uint8_t {
  None,
  AllReduce,
  ReduceScatter,
  AllGather,
  Broadcast,
  Reduce,
  AllToAll,
  AllToAllV,  // its bytes differ between ranks and steps: never compared
  Barrier,
  Send,
  Recv,
};
inline constexpr int kOpCount = 11;

enum class State : uint8_t { Empty, Scheduled, Started, Completed, Failed };

// What the training loop is doing (FlightRecorder::set_phase).
enum class Phase : uint8_t { Setup, Data, Forward, Backward, Communication, Optimizer, Checkpoint, Evaluation };
inline constexpr int kPhaseCount = 8;

inline bool is_point_to_point(Op op) { return op == Op::Send || op == Op::Recv; }

std::string_view op_name(Op op);        // "all_reduce", "send", ...
std::string_view state_name(State s);   // "scheduled", "started", "completed", "failed"
std::string_view phase_name(Phase p);   // "setup", "data", "forward", ...

struct GroupEntry {
  char name[16];            // "data", "tensor", "pipeline", "expert", "expert_data", "embedding", "all", "group"
  uint64_t members_hash;    // FNV-1a of the global ranks in group-rank order
  int32_t size;             // members
  int32_t rank;             // this process's rank in the group
  int32_t members[kMaxMembers];  // the first kMaxMembers global ranks, in group-rank order
};

struct Header {
  char magic[8];
  uint32_t version, header_bytes, record_bytes, capacity;
  int32_t rank, world, pid, group_count;
  uint64_t process_start;  // the process's start time (/proc/<pid>/stat field 22): tells a reused pid apart
  int64_t created_ns;      // CLOCK_REALTIME, as every time here
  char host[64];
  char job_id[64];         // MESHTRAIN_JOB_ID ("<id>-r<k>" after k restarts)
  // Written while the process runs:
  uint64_t write_index;    // records begun so far (atomic)
  int64_t step;            // the training loop's step (1-based) and phase, as last set
  int64_t phase_ns;        // when they were set
  uint32_t phase;
  uint32_t closed;         // 1 once the process closed the ring on its way out (not after SIGKILL)
  int64_t closed_ns;
  GroupEntry groups[kMaxGroups];
};
static_assert(sizeof(Header) <= kHeaderBytes);

struct Record {
  uint64_t stamp;          // history index + 1; 0 while being written
  uint64_t seq;            // collectives: the group's n-th (1-based); send/recv: the n-th with that peer that way
  uint64_t bytes;          // this rank's payload (all_gather: its input; reduce_scatter: its output)
  int64_t step;            // the step and phase when it was scheduled
  int64_t scheduled_ns, started_ns, ended_ns;  // 0 until they happen
  int32_t peer;            // send/recv: the peer's group rank; broadcast/reduce: the root; else -1
  uint16_t group;          // index into Header::groups, or kNoGroup
  uint8_t op, state, phase, algorithm;  // algorithm: comm::AllReduceAlgorithm of an all_reduce
  uint8_t reserved[2];
};
static_assert(sizeof(Record) == 72);

}  // namespace meshtrain::comm::flight
