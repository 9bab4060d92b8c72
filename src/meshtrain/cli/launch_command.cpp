// `meshtrain launch --nproc N [--master-addr A] [--master-port P] -- COMMAND...`
#include <chrono>
#include <memory>

#include "meshtrain/cli/commands.hpp"
#include "meshtrain/cli/self_executable.hpp"
#include "meshtrain/cluster/local_launcher.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::cli {

void add_launch_command(CLI::App& app, CommandSet& commands) {
  auto options = std::make_shared<LaunchOptions>();
  CLI::App* sub = app.add_subcommand("launch", "Start N local ranks of a command with the environment they need");
  sub->add_option("--nproc", options->nproc, "ranks to start")->required()->check(CLI::Range(1, 4096));
  auto grace_s = std::make_shared<double>(25);
  sub->add_option("--grace", *grace_s,
                  "seconds the ranks get to checkpoint and exit when launch is stopped by SIGTERM, SIGUSR1 or SIGINT "
                  "(a preemption), before SIGKILL")
      ->check(CLI::Range(0.0, 86400.0));
  sub->add_option("--master-addr", options->master_addr, "rendezvous address given to the ranks (MASTER_ADDR)");
  sub->add_option("--master-port", options->master_port, "rendezvous port (MASTER_PORT); 0 picks a free one")
      ->check(CLI::Range(0, 65535));
  sub->add_option("--reducers", options->reducers,
                  "also start R reducer ranks (meshtrain reducer) for the reduction_server all-reduce")
      ->check(CLI::Range(0, 4096));
  auto transport = std::make_shared<std::string>("auto");
  sub->add_option("--transport", *transport,
                  "the transport every rank uses under transport \"auto\", reducers included (MESHTRAIN_TRANSPORT)")
      ->check(CLI::IsMember(enum_name_list<comm::TransportKind>()));
  sub->add_option("command", options->command, "the command every rank runs (after --)")->required();
  sub->footer(
      "Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,\n"
      "MESHTRAIN_JOB_ID and MESHTRAIN_JOB_TOKEN. Output lines are prefixed with [rank k]. When a rank\n"
      "fails the others are stopped and launch exits with the failed rank's status.");
  commands.add(sub, [options, transport, grace_s] {
    options->stop_grace = std::chrono::milliseconds(static_cast<int64_t>(*grace_s * 1000 + 0.5));
    options->transport = *parse_enum<comm::TransportKind>(*transport);
    options->reducer_command = {self_executable(), "reducer"};
    LaunchResult r = launch_local(*options);
    if (r.exit_code != 0 && r.exit_code != kExitPreempted) std::fprintf(stderr, "meshtrain launch: error: %s\n", r.failure.c_str());
    return r.exit_code;
  });
}

}  // namespace meshtrain::cli
