#include "meshtrain/comm/bootstrap/job_rendezvous.hpp"

#include "meshtrain/comm/rendezvous/store_client.hpp"
#include "meshtrain/comm/rendezvous/torch_store_client.hpp"

namespace meshtrain::comm {

JobRendezvous::JobRendezvous(const LaunchEnv& env, std::chrono::milliseconds timeout) {
  const tcp::Endpoint at{env.master_addr, static_cast<uint16_t>(env.master_port)};
  if (env.store_host == StoreHost::TorchAgent) {
    auto client = std::make_unique<rendezvous::TorchStoreClient>(
        rendezvous::TorchStoreOptions{at, env.store_prefix, env.rank, timeout});
    description_ = "torchrun's agent store at " + at.str() + " (PyTorch TCPStore, " +
                   rendezvous::torch_store::generation_name(client->generation()) + "), keys under " +
                   env.store_prefix;
    client_ = std::move(client);
    return;
  }
  if (env.rank == 0)
    hosted_.emplace(rendezvous::StoreOptions{env.master_addr, at.port, env.token, env.job_id, env.world_size, {}});
  client_ = std::make_unique<rendezvous::StoreClient>(
      rendezvous::StoreClientOptions{at, env.token, env.job_id, env.rank, env.world_size, timeout});
  description_ = "rank 0's store at " + at.str();
}

}  // namespace meshtrain::comm
