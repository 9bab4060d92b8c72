#pragma once
// Who hung the job: a pure function over every rank's flight recorder ring
// (flight_reader.hpp), for the supervisor's failure summary and
// `meshtrain why-hung`.
//
// Each rank's history is cut after its first failed operation (what a rank
// does once its communicator broke says nothing of the hang). A rank waits
// when an operation of it has been started and not finished for
// min_wait_s, or failed. Then, in this order:
//   1. Mismatch: the first (earliest) sequence number of a group at which
//      its members' records disagree (operation, size, root, or the step
//      they made it in). The culprit is the member whose own history
//      deviates there (below), else the minority, else none.
//   2. Never entered: following "waits for" from every waiting rank (a
//      collective waits for the members that have not started its sequence
//      number; a send or receive for the peer that has not started the
//      matching one) to ranks that wait for nobody: those are outside any
//      collective, and their phase and step (the training loop's) say where.
//   3. Deviation: a rank whose operations in a step are not a prefix of
//      what it did in one of the steps before (training phases only:
//      evaluation and checkpoints come and go): it left one out, or made
//      another in its place.
//   4. Frozen: a waiting rank whose process is stopped (SIGSTOP) or gone
//      without closing its ring (killed), when every member entered the
//      operation it is in.
// Otherwise no single culprit is named.
#include <cstdint>
#include <string>
#include <vector>

#include "meshtrain/comm/flight/flight_reader.hpp"

namespace meshtrain::comm::flight {

struct DiagnosisOptions {
  int64_t now_ns = 0;       // the reader's clock (CLOCK_REALTIME), for ages
  double min_wait_s = 1.0;  // an operation started this long ago and not finished is waited in
};

enum class Finding { NoHang, Mismatch, NeverEntered, Deviation, Frozen, Unnamed };
std::string_view finding_name(Finding f);

struct Diagnosis {
  Finding finding = Finding::NoHang;
  std::vector<int> culprits;         // global ranks; empty when none is named
  std::string summary;               // one line: "culprit: rank 1 ...", "no hang: ...", "hang: no single culprit: ..."
  std::vector<std::string> details;  // who waits where, what the culprit's history shows
  bool named() const { return !culprits.empty(); }
};

// rings: one job's, any order; liveness: parallel to rings (Unknown where
// not known; may be empty).
Diagnosis diagnose(const std::vector<RankRing>& rings, const std::vector<Liveness>& liveness,
                   const DiagnosisOptions& options);

// One line per rank: its last operation (the one it waits in, if it waits),
// sequence number, state, age, the loop's phase and step, its process.
std::string rank_table(const std::vector<RankRing>& rings, const std::vector<Liveness>& liveness,
                       const DiagnosisOptions& options);

}  // namespace meshtrain::comm::flight
