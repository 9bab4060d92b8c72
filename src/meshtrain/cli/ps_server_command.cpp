// `meshtrain ps-server CONFIG [--section.key=value ...]`: a parameter server
// (parallel.data = "parameter_server"), one of the last parallel.servers
// ranks of the job. It holds a shard of the parameters and optimizer state
// and applies the workers' gradients as they arrive; server 0 saves the
// final checkpoint.
#include <memory>

#include "meshtrain/cli/commands.hpp"
#include "meshtrain/cli/launched_job_config.hpp"
#include "meshtrain/train/config/config_schema.hpp"
#include "meshtrain/train/ps/ps_server.hpp"

namespace meshtrain::cli {
namespace {

struct PsServerArgs {
  std::string config_path;
};

}  // namespace

void add_ps_server_command(CLI::App& app, CommandSet& commands) {
  auto args = std::make_shared<PsServerArgs>();
  CLI::App* sub = app.add_subcommand("ps-server", "Run a parameter server of an asynchronous data-parallel job");
  sub->add_option("config", args->config_path, "job config (TOML), the one the workers use")->required();
  sub->allow_extras();
  sub->footer(
      "Reads the launch environment: RANK, WORLD_SIZE, MESHTRAIN_NUM_SERVERS=P (ranks WORLD_SIZE-P ..\n"
      "WORLD_SIZE-1 are servers, the others workers), MESHTRAIN_SERVER_ADDRS=host:port,... (server j\n"
      "listens on the j-th), MESHTRAIN_JOB_ID and MESHTRAIN_JOB_TOKEN (clients must present them).\n"
      "Server j holds the j-th contiguous run of whole tensors (~1/P of the parameters). The job ends\n"
      "when server 0 has applied training.steps pushes; server 0 then gathers every shard, saves a\n"
      "checkpoint under checkpoint.dir and prints the final val_loss. Staleness statistics go to\n"
      "<training.out_dir>/server-<j>.jsonl.\n"
      "Config keys can be overridden as --section.key=value (as for `meshtrain train`).");
  commands.add(sub, [args, sub] {
    JobConfig config = load_launched_job_config(args->config_path, sub->remaining());
    config.parallel.data = DataParallelism::ParameterServer;
    run_parameter_server(config, stdout);
    return 0;
  });
}

}  // namespace meshtrain::cli
