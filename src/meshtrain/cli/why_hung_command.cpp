// `meshtrain why-hung RUN_DIR`: reads every worker's flight recorder ring
// (<training.out_dir>/flight/worker-<rank>.ring, comm/flight/) and names the
// rank that hung the job (comm/flight/hang_diagnosis.hpp), then a line per
// rank. Works on a running (hung) job and after it ended or was killed.
//
// Exit status: 0 when it named a culprit or found no hang; 1 when the rings
// show a hang but no single culprit; 3 when RUN_DIR holds no readable ring.
#include <cstdio>
#include <memory>

#include "meshtrain/cli/commands.hpp"
#include "meshtrain/comm/flight/hang_report.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::cli {
namespace {

struct WhyHungArgs {
  std::string run_dir;
  double min_wait_s = 1.0;
  bool verbose = false;
};

}  // namespace

void add_why_hung_command(CLI::App& app, CommandSet& commands) {
  auto args = std::make_shared<WhyHungArgs>();
  CLI::App* sub = app.add_subcommand(
      "why-hung",
      "Name the rank that hung a job, from its workers' flight recorder rings (<training.out_dir>/flight/): the rank "
      "that never entered a collective the others wait in (and its phase and step), the first mismatched operation "
      "or size, or a stopped or killed process; then each rank's last operation. Exit status 0: a culprit named or "
      "no hang; 1: a hang without a single culprit; 3: no rings in RUN_DIR");
  sub->add_option("run_dir", args->run_dir, "the job's training.out_dir (or its flight/ directory)")->required();
  sub->add_option("--min-wait", args->min_wait_s,
                  "seconds an operation must have been waited in to count as hung (a running job's collectives "
                  "take less)")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  sub->add_flag("-v,--verbose", args->verbose, "also print notes on the rings left out of the diagnosis");
  commands.add(sub, [args] {
    comm::flight::HangReport report;
    try {
      report = comm::flight::diagnose_run_dir(args->run_dir, args->min_wait_s);
    } catch (const Error& e) {
      throw ConfigError(std::string("why-hung: ") + e.what());
    }
    const comm::flight::Diagnosis& d = report.diagnosis;
    std::printf("%s\n", d.summary.c_str());
    for (const std::string& line : d.details) std::printf("  %s\n", line.c_str());
    std::printf("\n%s", report.table.c_str());
    if (args->verbose)
      for (const std::string& note : report.notes) std::printf("note: %s\n", note.c_str());
    const bool ok = d.named() || d.finding == comm::flight::Finding::NoHang;
    return ok ? 0 : 1;
  });
}

}  // namespace meshtrain::cli
