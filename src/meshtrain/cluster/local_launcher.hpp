#pragma once
// Starts N local ranks of one command, like torchrun: each child gets the
// environment a rank needs to find its peers (below), its stdout and stderr
// are forwarded line by line with a "[rank k] " prefix, and when any rank
// fails the others are stopped (SIGTERM, then SIGKILL after a grace period)
// and the launch fails with that rank's status (replica_supervisor.hpp does
// the watching; `meshtrain run` builds its pools with the same environment).
//
// Environment set for rank k of N (torchrun names, so the same binary also
// runs under torchrun):
//   RANK=k  WORLD_SIZE=N  LOCAL_RANK=k  LOCAL_WORLD_SIZE=N
//   MASTER_ADDR=127.0.0.1  MASTER_PORT=<free port>
//   MESHTRAIN_JOB_ID=<unique per launch>  MESHTRAIN_JOB_TOKEN=<random secret>
//   MESHTRAIN_NUM_SERVERS=R  (and MESHTRAIN_NUM_REDUCERS=R, its older name)
//   MESHTRAIN_SERVER_ADDRS=host:port,...  (parameter servers only)
//   MESHTRAIN_TRANSPORT=shm|tcp|mpi  (when the launch fixes the transport)
// With R reducers (the Reduction Server), ranks N .. N+R-1 run
// reducer_command instead, and WORLD_SIZE counts them too (N + R).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "meshtrain/cluster/replica_supervisor.hpp"
#include "meshtrain/comm/bootstrap/transport_kind.hpp"

namespace meshtrain {

// One job's rendezvous: the same for all of its ranks.
struct WorldInfo {
  int world_size = 1;   // workers + servers
  int num_servers = 0;  // the last num_servers ranks
  std::vector<std::string> server_addrs;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  std::string job_id;
  std::string token;
  comm::TransportKind transport = comm::TransportKind::Auto;  // what Auto means to every rank (MESHTRAIN_TRANSPORT)
};

// A fresh job on this host: a free port, a random token and a unique id.
WorldInfo new_local_world(int world_size, int num_servers, const std::string& master_addr = "127.0.0.1",
                          int master_port = 0);

// The launch variables of rank `rank` (all ranks on this host).
std::vector<std::string> rank_environment(const WorldInfo& world, int rank);

struct LaunchOptions {
  int nproc = 1;
  std::vector<std::string> command;  // argv of every rank
  int reducers = 0;                           // R: extra ranks that run reducer_command
  std::vector<std::string> reducer_command;  // e.g. {"/path/to/meshtrain", "reducer"}
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: pick a free port
  comm::TransportKind transport = comm::TransportKind::Auto;  // every rank's transport, reducers included
  std::chrono::milliseconds grace{5000};  // between SIGTERM and SIGKILL
  std::chrono::milliseconds stop_grace{25000};  // the same when launch itself is signalled (a preemption)
};

struct LaunchResult {
  int exit_code = 0;       // 0 when every rank succeeded
  int failed_rank = -1;    // the first rank that failed, or -1
  std::string failure;     // "rank 2 exited with status 3" / "rank 1 killed by signal 9"
};

// Runs the ranks to completion. Throws Error when a rank cannot be started.
LaunchResult launch_local(const LaunchOptions& options, std::FILE* out = stdout);

// A TCP port on addr that was free a moment ago (bind to port 0, read it back).
int pick_free_port(const std::string& addr);

// 32 hex characters from the kernel's random source.
std::string random_token();

}  // namespace meshtrain
