#pragma once
// Reading the flight recorder's rings (flight_record.hpp) from outside their
// processes: while they run, after they exited, or after SIGKILL. A ring is
// copied as it is; records caught half written are left out.
#include <cstdint>
#include <string>
#include <vector>

#include "meshtrain/comm/flight/flight_record.hpp"

namespace meshtrain::comm::flight {

struct RingGroup {
  std::string name;
  uint64_t members_hash = 0;
  int size = 0;
  int rank = 0;              // the ring's process's rank in the group
  std::vector<int> members;  // global ranks in group-rank order; only the first kMaxMembers of a larger group
};

struct RingRecord {
  uint64_t index = 0;        // place in the ring's history (0 = its first record)
  uint64_t seq = 0;
  uint64_t bytes = 0;
  int64_t step = 0;
  int64_t scheduled_ns = 0, started_ns = 0, ended_ns = 0;
  int peer = -1;
  int group = -1;            // index into RankRing::groups; -1: not registered
  Op op = Op::None;
  State state = State::Empty;
  Phase phase = Phase::Setup;
  uint8_t algorithm = 0;
};

struct RankRing {
  std::string path;
  int rank = -1, world = 0, pid = 0;
  uint64_t process_start = 0;
  int64_t created_ns = 0;
  std::string host, job_id;
  uint64_t write_index = 0;
  int64_t step = 0;          // the loop's step and phase when last set
  Phase phase = Phase::Setup;
  int64_t phase_ns = 0;
  bool closed = false;       // the process closed the ring on its way out
  int64_t closed_ns = 0;
  std::vector<RingGroup> groups;
  std::vector<RingRecord> records;  // oldest first
};

// One ring file. Throws Error when it cannot be read or is not a ring.
RankRing read_ring(const std::string& path);

// The rings of one job in `dir` (a run directory, whose flight/ holds them,
// or that flight directory itself), in rank order: the newest ring's job
// (MESHTRAIN_JOB_ID) only, so that rings an earlier job left behind in the
// same directory (more workers, an earlier restart) are not mixed in.
// `notes` gets a line for each ring left out or unreadable. Throws Error when
// the directory holds no ring.
std::vector<RankRing> read_rings(const std::string& dir, std::vector<std::string>* notes = nullptr);

// Whether the ring's process is alive, as far as this host can tell.
enum class Liveness { Unknown, Running, Stopped, Gone };
std::string_view liveness_name(Liveness l);
// Looks the process up in /proc when the ring was written on this host
// (the same host name; the start time tells a reused pid apart); Unknown for
// a ring of another host.
Liveness probe_liveness(const RankRing& ring);

}  // namespace meshtrain::comm::flight
