#pragma once
// The TCP transport: moves bytes between ranks on different hosts (or on one
// host without shared memory), bootstrapped by the rendezvous store.
//
// Why plain POSIX sockets and not Debian's libgloo-dev (0.0~git20220518):
// we need a per-job token checked on every connection, frames whose lengths
// are validated so a malformed or oversized one is dropped with a log line,
// timeouts and dead-peer errors that name the rank, reduce-on-receive out of
// our own staging buffer, and loopback-only listeners by default. That Gloo
// has no connection authentication (its handshake is an address exchange),
// no TCP store (only file, hash and redis stores), reports failures as
// enforce-style exceptions raised on its own event-loop thread, and receives
// into registered UnboundBuffers, so reducing would need a second copy and
// its Pair/Buffer lifecycle adapted to exchange(). What we need comes to
// about a thousand lines of sockets and poll(), store included; owning them
// keeps every error message, limit and check in two folders and adds no
// dependency.
//
// Terms:
//   mesh       one TCP connection per pair of ranks; the lower rank connects
//              to the higher one's data listener (mesh.hpp).
//   handshake  the first frame each way on a mesh connection: a Hello
//              {token, job id, sender rank, world size} (rendezvous/frame.hpp);
//              the listener drops connections whose Hello is wrong and keeps
//              serving, the connecting rank fails with a CommError.
//   data frame one message of exchange(): a 16-byte header (magic, length)
//              then the payload (tcp_exchange.hpp). The receiver checks the
//              length against its posted receive.
//   staging    one buffer per transport, allocated once, that a reducing
//              receive reads into before reduce_into() folds it into the
//              destination (tcp_exchange.hpp).
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "meshtrain/comm/transport/transport.hpp"

namespace meshtrain::comm {
namespace rendezvous {
class KeyValueStore;
}

struct TcpOptions {
  int rank = 0;
  int world_size = 1;
  // Where rank 0 hosts the rendezvous store (MASTER_ADDR:MASTER_PORT); rank 0
  // binds the store's listener to exactly this address.
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = 29500;
  // Per-job secret every store and mesh connection must present; required.
  std::string token;
  std::string job_id = "meshtrain";
  // One job may connect several meshes over one store (a channel per mesh
  // axis, bootstrap/connect.hpp): each publishes its addresses under its own
  // keys. "" is the job's main channel.
  std::string channel;
  // This rank's data listener; loopback unless configured. Port 0 = ephemeral.
  std::string bind_addr = "127.0.0.1";
  uint16_t bind_port = 0;
  // Address other ranks dial for this rank's listener. Empty: bind_addr, or
  // for a wildcard bind_addr ("0.0.0.0", "::") the local address this rank
  // uses to reach the store.
  std::string advertise_addr;
  // Rank 0 starts the store itself; false when a launcher (or a test) hosts it.
  bool host_store = true;
  // A store the caller has already opened (bootstrap/job_rendezvous.hpp: ours
  // or torchrun's), used instead of hosting and dialling one; it must stay
  // open until connect_tcp returns.
  rendezvous::KeyValueStore* store = nullptr;
  // Bounds rendezvous and mesh setup (ranks may start minutes apart).
  std::chrono::milliseconds connect_timeout{300000};
  TransportOptions transport;  // bounds each exchange()
  // MESHTRAIN_TCP_CONGESTION's value: "" prefers cubic, "system" keeps the
  // kernel's default, a name requires it (tcp/congestion.hpp says why).
  std::string congestion;
};

// Rendezvous, connect the full mesh, and return the transport. Blocks until
// every rank has connected or connect_timeout passes. Throws CommError.
std::unique_ptr<Transport> connect_tcp(const TcpOptions& options);

}  // namespace meshtrain::comm
