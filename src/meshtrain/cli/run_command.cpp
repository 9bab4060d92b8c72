// `meshtrain run CONFIG.toml [--nproc N] [--resume] [--section.key=value ...]`: a whole
// job on this host, every pool its config names (cluster/local_job.hpp),
// supervised with "[worker k] ", "[reducer j] ", "[server j] " and
// "[evaluator k] " prefixes.
#include <memory>

#include "meshtrain/cli/commands.hpp"
#include "meshtrain/cli/self_executable.hpp"
#include "meshtrain/cluster/local_job.hpp"
#include "meshtrain/train/config_schema.hpp"

namespace meshtrain::cli {

void add_run_command(CLI::App& app, CommandSet& commands) {
  auto request = std::make_shared<LocalJobRequest>();
  CLI::App* sub = app.add_subcommand("run", "Run a whole job on this host: workers, servers and evaluators");
  sub->add_option("config", request->config_path, "job config (TOML)")->required();
  sub->add_option("--nproc", request->nproc, "worker processes (default: parallel.workers)")
      ->check(CLI::Range(1, 4096));
  sub->add_flag("--resume", request->resume,
                "workers continue from the newest complete checkpoint, if there is one (meshtrain train --resume)");
  sub->allow_extras();
  sub->footer(
      "Starts parallel.workers x `meshtrain train`, parallel.reducers x `meshtrain reducer` (all_reduce =\n"
      "reduction_server), parallel.servers x `meshtrain ps-server` (data = parameter_server) and\n"
      "parallel.evaluators x `meshtrain evaluator`, each with the config and the --section.key=value\n"
      "overrides given here. When a worker, reducer or server fails the rest are stopped and run exits\n"
      "with its status; evaluators are stopped once the workers are done.");
  commands.add(sub, [request, sub] {
    request->overrides = sub->remaining();
    JobConfig config = load_job_config(request->config_path);
    apply_overrides(config, request->overrides);
    request->self = self_executable();
    SupervisorOptions options;
    options.name = "run";
    SupervisorResult r = supervise(plan_local_job(config, *request), options);
    if (r.exit_code != 0) std::fprintf(stderr, "meshtrain run: %s\n", r.failure.c_str());
    return r.exit_code;
  });
}

}  // namespace meshtrain::cli
