#include "meshtrain/comm/flight/hang_report.hpp"

#include "meshtrain/comm/flight/flight_recorder.hpp"

namespace meshtrain::comm::flight {

HangReport diagnose_run_dir(const std::string& dir, double min_wait_s) {
  HangReport report;
  report.rings = read_rings(dir, &report.notes);
  for (const RankRing& ring : report.rings) report.liveness.push_back(probe_liveness(ring));
  const DiagnosisOptions options{.now_ns = now_ns(), .min_wait_s = min_wait_s};
  report.diagnosis = diagnose(report.rings, report.liveness, options);
  report.table = rank_table(report.rings, report.liveness, options);
  return report;
}

}  // namespace meshtrain::comm::flight
