// `meshtrain run CONFIG.toml [--nproc N] [--section.key=value ...]`: a whole
// job on this host, every pool its config names (cluster/local_job.hpp),
// supervised with "[worker k] ", "[reducer j] ", "[server j] " and
// "[evaluator k] " prefixes, and restarted from its newest checkpoint when a
// replica fails (parallel.max_restarts).
#include <memory>

#include "meshtrain/cli/commands.hpp"
#include "meshtrain/cli/self_executable.hpp"
#include "meshtrain/cluster/local_job.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/train/config/config_schema.hpp"

namespace meshtrain::cli {

void add_run_command(CLI::App& app, CommandSet& commands) {
  auto request = std::make_shared<LocalJobRequest>();
  CLI::App* sub = app.add_subcommand("run", "Run a whole job on this host: workers, servers and evaluators");
  sub->add_option("config", request->config_path, "job config (TOML)")->required();
  sub->add_option("--nproc", request->nproc, "worker processes (default: parallel.workers)")
      ->check(CLI::Range(1, 4096));
  // Kept so that older command lines still parse: resuming is what run does.
  auto ignored_resume = std::make_shared<bool>(false);
  sub->add_flag("--resume", *ignored_resume,
                "accepted for compatibility: workers always continue from the newest complete checkpoint, if "
                "there is one (the default)");
  sub->allow_extras();
  sub->footer(
      "Starts parallel.workers x `meshtrain train`, parallel.reducers x `meshtrain reducer` (all_reduce =\n"
      "reduction_server), parallel.servers x `meshtrain ps-server` (data = parameter_server) and\n"
      "parallel.evaluators x `meshtrain evaluator`, each with the config and the --section.key=value\n"
      "overrides given here. Workers always resume from the newest complete checkpoint (run the same\n"
      "command again to continue a job; a finished one reports \"already finished\").\n"
      "When a worker, reducer or server fails (or a worker misses heartbeats, parallel.heartbeat_timeout_s),\n"
      "the rest are stopped and the whole job restarts from its newest complete checkpoint after\n"
      "parallel.restart_backoff_s (doubling, at most 30 s), up to parallel.max_restarts times; a dead\n"
      "parameter-server worker is first restarted alone. Then run exits with the failure's status and a\n"
      "summary of every replica's failures. Evaluators are stopped once the workers are done.\n"
      "SIGTERM, SIGUSR1 or SIGINT to run (a preemption) reaches every worker: each finishes its step, they\n"
      "checkpoint the same one and run exits with status 4; parallel.stop_grace_s later the rest are\n"
      "killed. Exit status 3: bad configuration or input; 5: the training diverged (docs/long-jobs.md).");
  commands.add(sub, [request, sub, ignored_resume] {
    request->overrides = sub->remaining();
    // --nproc is parallel.workers: set before the config is validated (a
    // layout such as --parallel.tensor=2 --parallel.pipeline=2 is checked
    // against the workers that will run it, not the file's count), and
    // passed on so that every child reads the same config.
    if (request->nproc > 0) request->overrides.push_back("--parallel.workers=" + std::to_string(request->nproc));
    JobConfig config = load_job_config(request->config_path, request->overrides);
    request->self = self_executable();
    SupervisorResult r = supervise(plan_local_job(config.parallel, *request), local_job_supervision(config));
    // Preempted (every worker checkpointed) is not an error: the supervisor said so.
    if (r.exit_code != 0 && r.exit_code != kExitPreempted) std::fprintf(stderr, "meshtrain run: error: %s\n", r.failure.c_str());
    return r.exit_code;
  });
}

}  // namespace meshtrain::cli
