// `meshtrain submit JOB.json`: runs a Vertex AI CustomJob's replicas as local
// processes (cluster/submit_job.hpp), each finding its role and peers from
// CLUSTER_SPEC / TF_CONFIG alone, as it would on Vertex AI. With
// --max-restarts the whole job is started again after a failure; the spec's
// commands are the user's own and are rerun unchanged, so resuming is theirs.
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>

#include "meshtrain/cli/commands.hpp"
#include "meshtrain/cli/self_executable.hpp"
#include "meshtrain/cluster/submit_job.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::cli {

namespace {

struct SubmitArgs {
  std::string path;
  int max_restarts = 0;
  double restart_backoff_s = 1;
};

}  // namespace

void add_submit_command(CLI::App& app, CommandSet& commands) {
  auto args = std::make_shared<SubmitArgs>();
  CLI::App* sub = app.add_subcommand("submit", "Run a Vertex AI CustomJob spec's replicas on this host");
  sub->add_option("job", args->path, "CustomJob (or CustomJobSpec) JSON file")->required();
  sub->add_option("--max-restarts", args->max_restarts,
                  "times the whole job is restarted after a replica of pools 0-2 fails (default 0); the spec's "
                  "commands are rerun as they are, so they must resume by themselves (meshtrain train --resume)")
      ->check(CLI::Range(0, 1000));
  sub->add_option("--restart-backoff-s", args->restart_backoff_s,
                  "wait before the first restart, in seconds; doubles per restart, at most 30 s (default 1)")
      ->check(CLI::Range(0.0, 3600.0));
  sub->footer(
      "workerPoolSpecs[0] is the primary (replicaCount 1), [1] workers, [2] parameter servers or reducers,\n"
      "[3] evaluators. Each replica runs containerSpec.command + args (`meshtrain` is this executable) with\n"
      "CLUSTER_SPEC and TF_CONFIG as Vertex AI sets them, on its own loopback port. Output lines carry\n"
      "[primary], [worker i], [server j], [evaluator k]. When a replica of pools 0-2 fails, the rest are\n"
      "stopped and, up to --max-restarts times, every replica is started again; then submit exits with\n"
      "its status and a summary of every replica's failures.");
  commands.add(sub, [args] {
    const std::string& path = args->path;
    std::ifstream in(path);
    if (!in) throw IoError("submit: cannot read " + path);
    std::stringstream text;
    text << in.rdbuf();
    const CustomJobSpec job = parse_custom_job(text.str(), path);
    check_submit_against_config(job, path);
    SupervisorOptions options;
    options.name = "submit";
    options.max_restarts = args->max_restarts;
    options.restart_backoff = std::chrono::milliseconds(static_cast<int64_t>(args->restart_backoff_s * 1000 + 0.5));
    SupervisorResult r = supervise(plan_submit(job, self_executable()), options);
    if (r.exit_code != 0 && r.exit_code != kExitPreempted) std::fprintf(stderr, "meshtrain submit: error: %s\n", r.failure.c_str());
    return r.exit_code;
  });
}

}  // namespace meshtrain::cli
