// The hang diagnosis (hang_diagnosis.hpp): a pure function of the rings.
#include "meshtrain/comm/flight/hang_diagnosis.hpp"

#include "meshtrain/comm/flight/hang_analysis.hpp"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <set>
#include <tuple>

namespace meshtrain::comm::flight {

std::string_view finding_name(Finding f) {
  switch (f) {
    case Finding::NoHang: return "no hang";
    case Finding::Mismatch: return "mismatch";
    case Finding::NeverEntered: return "never entered";
    case Finding::Deviation: return "deviation";
    case Finding::Frozen: return "frozen";
    case Finding::Unnamed: return "unnamed";
  }
  return "?";
}


Diagnosis diagnose(const std::vector<RankRing>& rings, const std::vector<Liveness>& liveness,
                   const DiagnosisOptions& options) {
  return detail::Analysis(rings, liveness, options).run();
}

std::string rank_table(const std::vector<RankRing>& rings, const std::vector<Liveness>& liveness,
                       const DiagnosisOptions& options) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%5s  %-8s  %-48s %6s  %-9s  %9s  %-13s %6s\n", "rank", "process",
                "waits in / last operation", "seq", "state", "age", "phase", "step");
  out += line;
  for (size_t i = 0; i < rings.size(); ++i) {
    const RankRing& ring = rings[i];
    const Liveness live = i < liveness.size() ? liveness[i] : Liveness::Unknown;
    const std::string process = ring.closed ? "exited" : std::string(liveness_name(live));
    // The operation it waits in (the oldest started, unfinished), else its last.
    const RingRecord* shown = nullptr;
    for (const RingRecord& r : ring.records) {
      if (r.state == State::Failed) {
        shown = &r;
        break;
      }
      if (r.state == State::Started && (!shown || shown->state != State::Started)) shown = &r;
    }
    if (!shown && !ring.records.empty()) shown = &ring.records.back();
    std::string op = "-", seq = "-", state = "-", age = "-";
    if (shown) {
      const std::string group = shown->group >= 0 ? ring.groups[size_t(shown->group)].name : "?";
      op = std::string(op_name(shown->op)) + " " + std::to_string(shown->bytes) + " B " + group;
      if (is_point_to_point(shown->op)) op += (shown->op == Op::Send ? " to " : " from ") + std::to_string(shown->peer);
      seq = std::to_string(shown->seq);
      state = std::string(state_name(shown->state));
      const int64_t since = shown->state == State::Started ? shown->started_ns
                            : shown->ended_ns                ? shown->ended_ns
                                                             : shown->scheduled_ns;
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2f s", double(options.now_ns - since) / 1e9);
      age = buf;
    }
    std::snprintf(line, sizeof line, "%5d  %-8s  %-48s %6s  %-9s  %9s  %-13s %6lld\n", ring.rank, process.c_str(),
                  op.c_str(), seq.c_str(), state.c_str(), age.c_str(), std::string(phase_name(ring.phase)).c_str(),
                  (long long)ring.step);
    out += line;
  }
  return out;
}

}  // namespace meshtrain::comm::flight
