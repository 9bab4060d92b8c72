// `meshtrain reducer`: a Reduction Server process (worker pool 2). It holds no
// model; it sums its segment of every all-reduce for the workers until they
// all shut down. Started by `meshtrain launch --reducers R`, or by a cluster
// spec, with the job's launch environment; the last R ranks are reducers.
#include <cstdio>
#include <memory>

#include "meshtrain/cli/commands.hpp"
#include "meshtrain/comm/bootstrap/connect.hpp"
#include "meshtrain/comm/reduction_server/groups.hpp"
#include "meshtrain/comm/reduction_server/reducer.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::cli {
namespace {

struct ReducerArgs {
  std::string transport = "auto";
  double timeout_s = 3600;
};

}  // namespace

void add_reducer_command(CLI::App& app, CommandSet& commands) {
  auto args = std::make_shared<ReducerArgs>();
  CLI::App* sub = app.add_subcommand("reducer", "Run a Reduction Server reducer (no model, no accelerator)");
  sub->add_option("--transport", args->transport, "auto, shm or tcp (as the workers use)")
      ->check(CLI::IsMember(enum_name_list<comm::TransportKind>()));
  sub->add_option("--timeout", args->timeout_s,
                  "seconds without progress before giving up; a dead worker is reported at once anyway")
      ->check(CLI::PositiveNumber);
  sub->footer(
      "Reads the launch environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, MESHTRAIN_JOB_ID,\n"
      "MESHTRAIN_JOB_TOKEN) and MESHTRAIN_NUM_SERVERS=R, or CLUSTER_SPEC / TF_CONFIG with R replicas in\n"
      "pool 2: ranks WORLD_SIZE-R .. WORLD_SIZE-1 are reducers,\n"
      "the others workers. Reducer j owns segment j of every all-reduce.");
  commands.add(sub, [args] {
    comm::LaunchEnv env = comm::read_launch_env();
    const int reducers = env.num_servers;
    if (reducers < 1)
      throw ConfigError("reducer: the launch environment names no reducers (MESHTRAIN_NUM_SERVERS, or pool 2 of "
                        "CLUSTER_SPEC / TF_CONFIG) in a world of " + std::to_string(env.world_size));
    const int workers = env.world_size - reducers;
    if (env.rank < workers)
      throw ConfigError("reducer: rank " + std::to_string(env.rank) + " is a worker rank (reducers are " +
                        std::to_string(workers) + ".." + std::to_string(env.world_size - 1) + ")");
    comm::TransportOptions options;
    options.timeout = std::chrono::milliseconds(static_cast<int64_t>(args->timeout_s * 1000));
    auto transport = comm::connect_transport(env, *parse_enum<comm::TransportKind>(args->transport), options);
    // Worker 0 says how many data-parallel groups share the reducers (the
    // tensor-parallel ways); this reducer serves one of them.
    namespace rs = comm::reduction_server;
    const rs::GroupRanks mine = rs::receive_assignment(*transport, workers, reducers, env.rank);
    auto stats = rs::serve(*transport, {mine.workers, mine.reducers});
    std::fprintf(stderr, "reducer rank %d: served %llu all-reduces, %.1f MB in\n", env.rank,
                 (unsigned long long)stats.requests, double(stats.bytes_in) / 1e6);
    return 0;
  });
}

}  // namespace meshtrain::cli
