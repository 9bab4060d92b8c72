#pragma once
// The hang diagnosis of a run directory as the supervisor and `meshtrain
// why-hung` make it: every ring of the job read (flight_reader.hpp), each
// process looked up where this host can, and diagnose() run over them.
#include <string>
#include <vector>

#include "meshtrain/comm/flight/hang_diagnosis.hpp"

namespace meshtrain::comm::flight {

struct HangReport {
  std::vector<RankRing> rings;
  std::vector<Liveness> liveness;  // parallel to rings
  Diagnosis diagnosis;
  std::vector<std::string> notes;  // rings left out, and why
  std::string table;               // rank_table()
};

// Throws Error when `dir` holds no readable ring.
HangReport diagnose_run_dir(const std::string& dir, double min_wait_s = 1.0);

}  // namespace meshtrain::comm::flight
