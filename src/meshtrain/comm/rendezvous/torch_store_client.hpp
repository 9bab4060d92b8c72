#pragma once
// A rank's connection to a PyTorch TCPStore (torch_store_protocol.hpp): the
// store torchrun's agent hosts on MASTER_ADDR:MASTER_PORT. Every key is put
// under `prefix`, so meshtrain's keys never meet torch's own or those of
// another job or restart on the same store. The store's generation is probed
// on a throwaway connection first. Every call is bounded by the timeout;
// errors are CommError naming the store and the key.
#include <chrono>
#include <string>
#include <string_view>

#include "meshtrain/comm/rendezvous/key_value_store.hpp"
#include "meshtrain/comm/rendezvous/torch_store_protocol.hpp"

namespace meshtrain::comm::rendezvous {

struct TorchStoreOptions {
  tcp::Endpoint store;
  std::string prefix;  // e.g. "/meshtrain/<job id>/"
  int rank = 0;        // for messages
  std::chrono::milliseconds timeout{300000};
};

class TorchStoreClient final : public KeyValueStore {
 public:
  explicit TorchStoreClient(TorchStoreOptions options);

  void set(std::string_view key, std::string_view value) override;
  std::string get(std::string_view key) override;
  tcp::Endpoint local_endpoint() const override { return tcp::local_endpoint(fd_.get()); }

  torch_store::Generation generation() const { return generation_; }

 private:
  std::string full_key(std::string_view key) const { return options_.prefix + std::string(key); }
  // Reads exactly n bytes of a reply to `what`, before the deadline.
  std::string read_exactly(size_t n, tcp::Clock::time_point deadline, std::string_view what);
  std::string where() const;

  TorchStoreOptions options_;
  torch_store::Generation generation_ = torch_store::Generation::Current;
  tcp::Fd fd_;
  std::string in_;
};

// Which protocol generation the store at `store` speaks (see
// torch_store::generation_probe()).
torch_store::Generation probe_torch_store(const tcp::Endpoint& store, tcp::Clock::time_point deadline);

}  // namespace meshtrain::comm::rendezvous
