#pragma once
// The parameter-server role: listens on its address, serves workers' pulls
// and pushes for its shard (server_state.hpp holds the logic), and ends the
// job.
//
// Termination. Server 0's step is the global step: when it has applied
// total_steps pushes it is done, and answers every later request with Done
// (workers then exit 0). It waits (at most `drain`) for its workers to hang
// up: a worker hangs up only after its last round, so every push a worker
// sent before learning of the end has been applied by every server by then.
// Server 0 then connects to servers 1..P-1 and sends each Finish; each replies
// with its final shard (parameters and optimizer state) and is done too. So
// the job ends after exactly total_steps pushes on server 0; another server
// may have applied a few more (pushes in flight when server 0 finished: it
// refused them, the others did not) or fewer (pushes a worker half-sent as
// it died). Server 0 returns the gathered full state, which the caller saves
// as a normal checkpoint.
// Failures. A worker that dies or falls silent for `timeout` loses its
// connection; the others go on. A server with no request from anyone for
// `timeout` gives up with CommError. Server 0 fails when it cannot gather a
// shard (a server died): no checkpoint is written then.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "meshtrain/comm/transport/tcp/socket.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/parallel/parameter_server/server_state.hpp"

namespace meshtrain::parallel::ps {

struct ServerOptions {
  ServerStateOptions state;  // index, workers, steps, staleness, optimizer, schedule, reports
  int num_servers = 1;
  // Every server's address in index order; [index] is where this one listens.
  // Server 0 connects to the others' at the end (a port 0 entry is for tests
  // that listen on an ephemeral port; other servers' ports must be real).
  std::vector<comm::tcp::Endpoint> servers;
  int world_size = 1;  // num_workers + num_servers, checked in every Hello
  std::string token;
  std::string job_id;
  std::chrono::milliseconds timeout{300000};
  std::chrono::milliseconds drain{10000};
  std::FILE* log = stderr;  // joins, leaves, dropped connections
};

// Server 0's result: the whole model's final parameters and optimizer state.
struct FinalState {
  int64_t step = 0;           // server 0's step (the optimizer's steps taken)
  std::vector<float> params;  // flat_size elements, the full store's layout
  std::vector<std::pair<std::string, std::vector<float>>> state;  // per optimizer state buffer, flat_size each
};

struct ServerResult {
  int64_t step = 0;
  StalenessStats staleness;
  std::vector<WorkerRecord> workers;  // per rank: clock (pushes applied), joins
  std::optional<FinalState> final_state;  // server 0 only
};

class Server {
 public:
  // Carves shard `index` out of `initial` (the model, initialized the same
  // way on every server) and starts listening. CommError if the port is taken.
  Server(const ParamStore& initial, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  uint16_t port() const;  // the bound port (useful with port 0)
  // Serves until the job ends (see above); throws CommError on failure.
  ServerResult serve();
  // From any thread: drops every connection and makes serve() throw
  // CommError ("stopped") soon. For tests and signal handlers.
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace meshtrain::parallel::ps
