#include <memory>
#include <optional>

#include "meshtrain/comm/rendezvous/store_client.hpp"
#include "meshtrain/comm/rendezvous/store_server.hpp"
#include "meshtrain/comm/transport/tcp/congestion.hpp"
#include "meshtrain/comm/transport/tcp/mesh.hpp"
#include "meshtrain/comm/transport/tcp/tcp_exchange.hpp"
#include "meshtrain/comm/transport/tcp/tcp_transport.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {

namespace {

void check_options(const TcpOptions& o) {
  const std::string me = "rank " + std::to_string(o.rank);
  if (o.world_size < 1) throw CommError(me + ": world size " + std::to_string(o.world_size) + " is not positive");
  if (o.rank < 0 || o.rank >= o.world_size)
    throw CommError(me + " is outside [0, " + std::to_string(o.world_size) + ")");
  if (o.token.empty()) throw CommError(me + ": TcpOptions.token is empty; every job needs a secret token");
  if (o.token.size() > 1024) throw CommError(me + ": the token is longer than 1024 bytes");
  if (o.job_id.size() > rendezvous::kMaxJobIdBytes)
    throw CommError(me + ": the job id is longer than " + std::to_string(rendezvous::kMaxJobIdBytes) + " bytes");
}

bool is_wildcard(const std::string& addr) { return addr.empty() || addr == "0.0.0.0" || addr == "::"; }

}  // namespace

std::unique_ptr<Transport> connect_tcp(const TcpOptions& o) {
  check_options(o);
  const std::string congestion = tcp::resolve_congestion(tcp::congestion_choice(o.congestion));
  if (o.world_size == 1) return std::make_unique<tcp::TcpTransport>(0, std::vector<tcp::Fd>(1), o.transport);

  const auto deadline = tcp::Clock::now() + o.connect_timeout;
  std::optional<rendezvous::TcpStore> store;
  if (o.rank == 0 && o.host_store && !o.store)
    store.emplace(rendezvous::StoreOptions{o.master_addr, o.master_port, o.token, o.job_id, o.world_size, {}});

  // Listen before rendezvous, so the address we publish already accepts.
  tcp::Fd listener = tcp::listen_on(o.bind_addr, o.bind_port);
  std::optional<rendezvous::StoreClient> own_client;
  if (!o.store)
    own_client.emplace(rendezvous::StoreClientOptions{{o.master_addr, o.master_port}, o.token, o.job_id, o.rank,
                                                      o.world_size, o.connect_timeout});
  rendezvous::KeyValueStore& client = o.store ? *o.store : *own_client;
  tcp::Endpoint advertise{o.advertise_addr, tcp::local_endpoint(listener.get()).port};
  if (advertise.host.empty())
    advertise.host = is_wildcard(o.bind_addr) ? client.local_endpoint().host : o.bind_addr;

  tcp::MeshOptions mesh{o.rank, o.world_size, o.token, o.job_id, deadline, congestion, o.channel};
  std::vector<tcp::Fd> peers = tcp::build_mesh(mesh, listener, advertise, client);
  // No rank needs the store or the listener any more (mesh.hpp); `store` and
  // `listener` close as this function returns.
  return std::make_unique<tcp::TcpTransport>(o.rank, std::move(peers), o.transport);
}

}  // namespace meshtrain::comm
