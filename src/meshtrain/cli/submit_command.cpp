// `meshtrain submit JOB.json`: runs a Vertex AI CustomJob's replicas as local
// processes (cluster/submit_job.hpp), each finding its role and peers from
// CLUSTER_SPEC / TF_CONFIG alone, as it would on Vertex AI.
#include <fstream>
#include <memory>
#include <sstream>

#include "meshtrain/cli/commands.hpp"
#include "meshtrain/cli/self_executable.hpp"
#include "meshtrain/cluster/submit_job.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::cli {

void add_submit_command(CLI::App& app, CommandSet& commands) {
  auto path = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("submit", "Run a Vertex AI CustomJob spec's replicas on this host");
  sub->add_option("job", *path, "CustomJob (or CustomJobSpec) JSON file")->required();
  sub->footer(
      "workerPoolSpecs[0] is the primary (replicaCount 1), [1] workers, [2] parameter servers or reducers,\n"
      "[3] evaluators. Each replica runs containerSpec.command + args (`meshtrain` is this executable) with\n"
      "CLUSTER_SPEC and TF_CONFIG as Vertex AI sets them, on its own loopback port. Output lines carry\n"
      "[primary], [worker i], [server j], [evaluator k]. When a replica of pools 0-2 fails, the rest are\n"
      "stopped and submit exits with its status.");
  commands.add(sub, [path] {
    std::ifstream in(*path);
    if (!in) throw IoError("submit: cannot read " + *path);
    std::stringstream text;
    text << in.rdbuf();
    const CustomJobSpec job = parse_custom_job(text.str(), *path);
    check_submit_against_config(job, *path);
    SupervisorOptions options;
    options.name = "submit";
    SupervisorResult r = supervise(plan_submit(job, self_executable()), options);
    if (r.exit_code != 0) std::fprintf(stderr, "meshtrain submit: %s\n", r.failure.c_str());
    return r.exit_code;
  });
}

}  // namespace meshtrain::cli
