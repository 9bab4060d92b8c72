#pragma once
// A rank's connection to the rendezvous store (store_server.hpp): connect and
// authenticate with Hello, then set/get/wait on keys. Every call is bounded
// by the timeout; errors are CommError naming the store and the key.
#include <chrono>
#include <span>
#include <string>
#include <string_view>

#include "meshtrain/comm/rendezvous/frame.hpp"
#include "meshtrain/comm/rendezvous/key_value_store.hpp"
#include "meshtrain/comm/transport/tcp/socket.hpp"

namespace meshtrain::comm::rendezvous {

struct StoreClientOptions {
  tcp::Endpoint store;  // MASTER_ADDR:MASTER_PORT
  std::string token;
  std::string job_id;
  int rank = 0;
  int world_size = 1;
  // Bounds the connect (retried while the store is not up yet) and each call.
  std::chrono::milliseconds timeout{300000};
};

class StoreClient final : public KeyValueStore {
 public:
  // Connects and authenticates; throws CommError if the store refuses the
  // Hello (its message says why) or does not answer in time.
  explicit StoreClient(StoreClientOptions options);

  void set(std::string_view key, std::string_view value) override;
  // Waits until `key` has been set by any rank, then returns its value.
  std::string get(std::string_view key) override;
  // Waits until every key has been set.
  void wait(std::span<const std::string> keys);

  // Our side of the connection: the local address that reaches the store.
  tcp::Endpoint local_endpoint() const override { return tcp::local_endpoint(fd_.get()); }

 private:
  // Sends one request and returns the reply's value; throws on Error replies.
  std::string request(FrameType type, std::string_view key, std::string_view value);

  StoreClientOptions options_;
  tcp::Fd fd_;
  std::string in_;  // bytes read but not yet decoded
};

}  // namespace meshtrain::comm::rendezvous
