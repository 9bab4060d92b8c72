// `meshtrain bench collectives`: all-reduce time and bandwidth per size, one
// JSON line each (see comm/bench/bench_report.hpp for the definitions).
//
// Started by hand, with --nproc N and no launch environment, it relaunches
// itself as N ranks through launch_local (plus R `meshtrain reducer` ranks
// for --algo reduction_server) and prints rank 0's lines without the
// "[rank 0] " prefix, so stdout is clean JSON; everything else goes to
// stderr. Under mpirun (--transport mpi) every rank runs this command, and
// with reducers the last R ranks serve instead of benchmarking.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>

#include "meshtrain/cli/commands.hpp"
#include "meshtrain/cli/self_executable.hpp"
#include "meshtrain/cluster/local_launcher.hpp"
#include "meshtrain/comm/bench/all_reduce_bench.hpp"
#include "meshtrain/comm/bootstrap/connect.hpp"
#include "meshtrain/comm/reduction_server/groups.hpp"
#include "meshtrain/comm/reduction_server/reducer.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::cli {
namespace {

struct BenchArgs {
  int nproc = 0;
  std::string transport = "shm";
  std::string algo = "ring";
  std::string sizes = "4K:256M";
  int reducers = 0;
  std::string rs_chunk = std::to_string(comm::reduction_server::kDefaultChunkBytes >> 10) + "K";
  int rs_in_flight = 1;
  int iters = 40;
  double timeout_s = 120;
  bool check = false;
  bool json = false;
};

// The launcher writes every rank's lines, prefixed, to one stream: rank 0's
// result lines go to stdout bare, all else to stderr as it came.
void route_lines(int fd) {
  std::FILE* in = ::fdopen(fd, "r");
  char* line = nullptr;
  size_t capacity = 0;
  static constexpr char kRank0[] = "[rank 0] ";
  constexpr size_t kPrefix = sizeof(kRank0) - 1;
  while (::getline(&line, &capacity, in) > 0) {
    const bool result = std::strncmp(line, kRank0, kPrefix) == 0 &&
                        (line[kPrefix] == '{' || std::strncmp(line + kPrefix, "all_reduce ", 11) == 0);
    std::fputs(result ? line + kPrefix : line, result ? stdout : stderr);
    if (result) std::fflush(stdout);
  }
  std::free(line);
  std::fclose(in);
}

int relaunch(const BenchArgs& a) {
  const std::string self = self_executable();
  LaunchOptions launch;
  launch.nproc = a.nproc;
  const std::string timeout = std::to_string(a.timeout_s);
  launch.command = {self, "bench", "collectives", "--nproc", std::to_string(a.nproc), "--transport", a.transport,
                    "--algo", a.algo, "--sizes", a.sizes, "--iters", std::to_string(a.iters), "--timeout", timeout};
  if (a.check) launch.command.push_back("--check");
  if (a.json) launch.command.push_back("--json");
  if (a.reducers > 0) {
    launch.command.insert(launch.command.end(), {"--reducers", std::to_string(a.reducers), "--rs-chunk", a.rs_chunk,
                                                 "--rs-in-flight", std::to_string(a.rs_in_flight)});
    launch.reducers = a.reducers;
    launch.reducer_command = {self, "reducer", "--transport", a.transport, "--timeout", timeout};
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Error("bench collectives: pipe failed: " + std::string(std::strerror(errno)));
  std::FILE* out = ::fdopen(fds[1], "w");
  std::setvbuf(out, nullptr, _IOLBF, 0);
  std::thread router(route_lines, fds[0]);
  LaunchResult result;
  try {
    result = launch_local(launch, out);
  } catch (...) {
    std::fclose(out);
    router.join();
    throw;
  }
  std::fclose(out);
  router.join();
  if (result.exit_code != 0) std::fprintf(stderr, "meshtrain bench collectives: error: %s\n", result.failure.c_str());
  return result.exit_code;
}

void print_result(const comm::bench::BenchResult& r, bool json) {
  if (json) {
    std::printf("%s\n", comm::bench::to_json(r).c_str());
  } else {
    std::printf("all_reduce %-16s %-4s n=%d %10zu B %12.2f us  algbw %7.3f GB/s  busbw %7.3f GB/s\n",
                r.algo.c_str(), r.transport.c_str(), r.nproc, r.bytes, r.time_us, r.algbw_GBps, r.busbw_GBps);
  }
  std::fflush(stdout);
}

// One rank of the job: the last R ranks serve, the others benchmark.
int run_rank(const BenchArgs& a, comm::LaunchEnv env) {
  // meshtrain's launchers name the reducers (MESHTRAIN_NUM_SERVERS, pool 2 of
  // CLUSTER_SPEC); under mpirun, srun or torchrun --reducers does.
  const bool named = env.num_servers > 0 || env.launcher == "meshtrain" || env.launcher == "vertex";
  const int reducers = named ? env.num_servers : a.reducers;
  const int workers = env.world_size - reducers;
  if (reducers < 0 || workers < 1)
    throw ConfigError("bench collectives: " + std::to_string(reducers) + " reducers leave no workers in a world of " +
                      std::to_string(env.world_size));
  if (a.nproc > 0 && a.nproc != workers)
    throw ConfigError("bench collectives: --nproc " + std::to_string(a.nproc) + " but the job has " +
                      std::to_string(workers) + " worker ranks (WORLD_SIZE " + std::to_string(env.world_size) +
                      " minus " + std::to_string(reducers) + " reducers)");
  comm::bench::AllReduceBenchOptions options;
  options.algorithm = comm::parse_all_reduce_algorithm(a.algo);
  options.algo_name = a.algo;
  options.sizes = comm::bench::parse_size_range(a.sizes);
  options.iters = a.iters;
  options.check = a.check;
  options.reducers = reducers;
  if ((options.algorithm == comm::AllReduceAlgorithm::ReductionServer) != (reducers > 0))
    throw ConfigError("bench collectives: --algo reduction_server needs reducers (--reducers R), and reducers need it");

  comm::TransportOptions transport_options;
  transport_options.timeout = std::chrono::milliseconds(static_cast<int64_t>(a.timeout_s * 1000));
  auto transport = comm::connect_transport(env, *parse_enum<comm::TransportKind>(a.transport), transport_options);
  std::vector<int> worker_ranks(static_cast<size_t>(workers)), reducer_ranks(static_cast<size_t>(reducers));
  std::iota(worker_ranks.begin(), worker_ranks.end(), 0);
  std::iota(reducer_ranks.begin(), reducer_ranks.end(), workers);
  // One data-parallel group; the reducers (this command's, or `meshtrain
  // reducer`) learn that from worker 0 as in training (reduction_server/groups.hpp).
  namespace rs = comm::reduction_server;
  if (env.rank >= workers) {
    const rs::GroupRanks mine = rs::receive_assignment(*transport, workers, reducers, env.rank);
    rs::serve(*transport, {mine.workers, mine.reducers});
    return 0;
  }
  if (reducers > 0 && env.rank == 0) rs::announce_groups(*transport, workers, reducers, 1);
  auto communicator = std::make_shared<comm::Communicator>(std::move(transport));
  comm::ProcessGroup group(communicator, worker_ranks);
  if (reducers > 0) group.use_reducers(reducer_ranks, comm::bench::parse_bytes(a.rs_chunk), a.rs_in_flight);
  comm::bench::run_all_reduce_bench(group, options, [&](const comm::bench::BenchResult& r) { print_result(r, a.json); });
  if (reducers > 0) group.shutdown_reducers_async()->wait();
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, CommandSet& commands) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* bench = app.add_subcommand("bench", "Measure meshtrain's building blocks");
  bench->require_subcommand(1);
  CLI::App* sub = bench->add_subcommand("collectives", "All-reduce time and bus bandwidth per message size");
  sub->add_option("--nproc", args->nproc, "worker ranks; started here unless a launcher already did")
      ->check(CLI::Range(1, 4096));
  sub->add_option("--transport", args->transport, "shm, tcp or mpi (mpi: run under mpirun)")
      ->check(CLI::IsMember(enum_name_list<comm::TransportKind>()));
  sub->add_option("--algo", args->algo, "ring, tree, hd (halving-doubling), rd (recursive doubling), reduction_server or auto")
      ->check(CLI::IsMember({"ring", "tree", "hd", "rd", "reduction_server", "auto"}));
  sub->add_option("--sizes", args->sizes, "LOW:HIGH in bytes, doubling (K, M, G = powers of 1024)");
  sub->add_option("--reducers", args->reducers, "reducer ranks for --algo reduction_server (default: --nproc)")
      ->check(CLI::Range(0, 4096));
  sub->add_option("--rs-chunk", args->rs_chunk, "Reduction Server: bytes per chunk (K, M suffixes; default " + args->rs_chunk + ")");
  sub->add_option("--rs-in-flight", args->rs_in_flight, "Reduction Server: chunks sent ahead of the sums back")
      ->check(CLI::Range(1, comm::reduction_server::kMaxInFlight));
  sub->add_option("--iters", args->iters, "timed calls per size up to 8 MiB (fewer above, at least 3)")
      ->check(CLI::Range(1, 1000000));
  sub->add_option("--timeout", args->timeout_s, "seconds any one exchange may take")->check(CLI::PositiveNumber);
  sub->add_flag("--check", args->check, "verify every result exactly on every rank first (non-zero exit if wrong)");
  sub->add_flag("--json", args->json, "one JSON line per size (nccl-tests' algbw and busbw)");
  add_bench_schedule_command(*bench, commands);
  commands.add(sub, [args] {
    BenchArgs a = *args;
    if (a.algo == "reduction_server" && a.reducers == 0) a.reducers = a.nproc > 0 ? a.nproc : 1;
    const comm::LaunchEnv env = comm::read_launch_env();
    if (env.launcher == "none" && a.nproc + a.reducers > 1) {
      if (parse_enum<comm::TransportKind>(a.transport) == comm::TransportKind::Mpi)
        throw ConfigError("bench collectives: --transport mpi runs under mpirun: mpirun -np " +
                          std::to_string(a.nproc + a.reducers) + " meshtrain bench collectives --transport mpi ...");
      return relaunch(a);
    }
    return run_rank(a, env);
  });
}

}  // namespace meshtrain::cli
