#pragma once
// The job's rendezvous store, opened as the launcher set it up: under
// torchrun's agent store (LaunchEnv::store_host == TorchAgent) every rank is a
// client of the agent's PyTorch TCPStore, its keys under the job's prefix;
// otherwise rank 0 hosts meshtrain's own authenticated store on
// MASTER_ADDR:MASTER_PORT and every rank (rank 0 too) connects to it.
//
// Keep it open until the transport it helps build is connected: rank 0's
// store then outlives every other rank's last request (the TCP mesh and the
// shared-memory join each complete only once every rank has finished with it).
#include <chrono>
#include <memory>
#include <optional>

#include "meshtrain/comm/bootstrap/launch_env.hpp"
#include "meshtrain/comm/rendezvous/key_value_store.hpp"
#include "meshtrain/comm/rendezvous/store_server.hpp"

namespace meshtrain::comm {

class JobRendezvous {
 public:
  // Throws CommError when the store cannot be hosted (port in use) or
  // reached within `timeout`.
  JobRendezvous(const LaunchEnv& env, std::chrono::milliseconds timeout);

  rendezvous::KeyValueStore& store() { return *client_; }
  // "torchrun's agent store at localhost:29500 (PyTorch TCPStore, 2.2 or
  // later)" or "rank 0's store at 10.0.0.1:29500", for the log.
  const std::string& description() const { return description_; }

 private:
  std::optional<rendezvous::TcpStore> hosted_;  // rank 0's own store
  std::unique_ptr<rendezvous::KeyValueStore> client_;
  std::string description_;
};

}  // namespace meshtrain::comm
