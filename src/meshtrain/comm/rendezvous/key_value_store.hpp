#pragma once
// What a rank needs from a rendezvous store: publish a value under a key and
// read another rank's, waiting until it is there. Two stores implement it:
// meshtrain's own (store_client.hpp, hosted by rank 0) and the TCPStore that
// torchrun's agent already hosts (torch_store_client.hpp). Everything built
// on a rendezvous (the TCP mesh, learning which ranks share a host) sees
// only this interface, so it runs unchanged under either.
#include <string>
#include <string_view>

#include "meshtrain/comm/transport/tcp/socket.hpp"

namespace meshtrain::comm::rendezvous {

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  virtual void set(std::string_view key, std::string_view value) = 0;
  // Waits (bounded by the store's timeout) until `key` is set, then returns
  // its value; throws CommError naming the key on timeout.
  virtual std::string get(std::string_view key) = 0;
  // The local address this rank uses to reach the store: the address other
  // ranks can most likely reach this rank at.
  virtual tcp::Endpoint local_endpoint() const = 0;
};

}  // namespace meshtrain::comm::rendezvous
