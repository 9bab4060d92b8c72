#pragma once
// A worker's side of the parameter-server protocol: one connection per
// server, opened and authenticated up front. Each call is one round: the
// request goes to every server first, then the replies are read, so the P
// servers work in parallel.
//
// Outcomes of a round: every server answered (true); some server said Done
// (false: the job is over, exit 0, even if another server has already hung
// up); otherwise an error reply, a closed connection or a timeout throws
// CommError naming the server and its address.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "meshtrain/comm/transport/tcp/socket.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/parallel/parameter_server/connection.hpp"
#include "meshtrain/parallel/parameter_server/shard_plan.hpp"

namespace meshtrain::parallel::ps {

struct ClientOptions {
  std::vector<comm::tcp::Endpoint> servers;  // in index order
  std::string token;
  std::string job_id;
  int rank = 0;  // this worker's world rank, in [0, num_workers)
  int world_size = 1;
  // Bounds connecting (retried while a server is not up yet) and each reply.
  // Pulls from server 0 may wait for the slowest worker; server 0 answers
  // those within its own timeout, so we allow a little more.
  std::chrono::milliseconds timeout{300000};
};

class Client {
 public:
  // Connects to every server and says Hello for the shard `layout` implies.
  Client(const ParamStore& layout, ClientOptions options);
  ~Client();

  // This rank's clock as server 0 reported it on joining: pushes it had
  // already applied from this rank (0 unless the rank is rejoining).
  int64_t initial_clock() const { return initial_clock_; }
  int64_t server_step() const { return server_step_; }  // server 0's step, last heard
  int64_t last_staleness() const { return last_staleness_; }  // max over servers, last push

  // Fills the store's parameters with every server's shard; false when the
  // job is done. A store on a device receives them through a host copy.
  bool pull(ParamStore& store);
  // Sends the store's gradients (off the CPU, downloaded first), shard by
  // shard, computed on the last pull's parameters; false when the job is done.
  bool push(const ParamStore& store);

 private:
  struct Server {
    std::unique_ptr<Connection> conn;
    ShardRange shard;
    int64_t version = 0;  // step of the shard last pulled
  };
  // Sends to every server (payload_for(j) gives each one's), then reads every
  // reply; `on_reply` takes the good ones. Returns false when one said Done.
  template <class PayloadFn, class ReplyFn>
  bool round(Kind kind, Kind expect, PayloadFn payload_for, ReplyFn on_reply);

  ClientOptions options_;
  std::vector<Server> servers_;
  int64_t initial_clock_ = 0;
  int64_t server_step_ = 0;
  int64_t last_staleness_ = 0;
  std::vector<float> staged_;  // a store on a device: the host copy a pull or push passes through
};

}  // namespace meshtrain::parallel::ps
