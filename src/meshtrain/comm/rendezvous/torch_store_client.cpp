#include "meshtrain/comm/rendezvous/torch_store_client.hpp"

#include <array>

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::rendezvous {

using torch_store::Generation;

torch_store::Generation probe_torch_store(const tcp::Endpoint& store, tcp::Clock::time_point deadline) {
  const std::string what = "torchrun's store at " + store.str();
  tcp::Fd fd = tcp::connect_with_retry(store, deadline, what);
  tcp::write_all(fd.get(), torch_store::generation_probe(), deadline, what);
  std::string in;
  while (in.size() < torch_store::kLengthBytes) {
    switch (tcp::read_some(fd.get(), in, deadline, what)) {
      case tcp::ReadStatus::Data: break;
      case tcp::ReadStatus::Eof:
        if (in.empty()) return Generation::Legacy;
        throw CommError(what + " closed the connection in the middle of an answer: is it a PyTorch TCPStore?");
      case tcp::ReadStatus::Timeout:
        throw CommError("timed out waiting for " + what + " to answer: is it a PyTorch TCPStore?");
    }
  }
  return Generation::Current;
}

TorchStoreClient::TorchStoreClient(TorchStoreOptions options) : options_(std::move(options)) {
  const auto deadline = tcp::Clock::now() + options_.timeout;
  generation_ = probe_torch_store(options_.store, deadline);
  fd_ = tcp::connect_with_retry(options_.store, deadline, where());
  if (std::string validate = torch_store::encode_validate(generation_); !validate.empty())
    tcp::write_all(fd_.get(), validate, deadline, where());
}

std::string TorchStoreClient::where() const { return "torchrun's store at " + options_.store.str(); }

void TorchStoreClient::set(std::string_view key, std::string_view value) {
  const auto deadline = tcp::Clock::now() + options_.timeout;
  tcp::write_all(fd_.get(), torch_store::encode_set(generation_, full_key(key), value), deadline, where());
}

std::string TorchStoreClient::get(std::string_view key) {
  const auto deadline = tcp::Clock::now() + options_.timeout;
  const std::string k = full_key(key);
  // GET of a missing key fails the connection: wait for it first.
  const std::array<std::string, 1> keys{k};
  tcp::write_all(fd_.get(), torch_store::encode_wait(generation_, keys), deadline, where());
  const std::string wait = "key '" + k + "'";
  if (static_cast<uint8_t>(read_exactly(1, deadline, wait)[0]) != torch_store::kStopWaiting)
    throw CommError("rank " + std::to_string(options_.rank) + ": unexpected answer from " + where() + " to WAIT " + wait);
  tcp::write_all(fd_.get(), torch_store::encode_get(generation_, k), deadline, where());
  const uint64_t n = static_cast<uint64_t>(torch_store::decode_int64(read_exactly(8, deadline, wait)));
  constexpr uint64_t kMaxValueBytes = 1 << 20;  // ours are addresses and host names
  if (n > kMaxValueBytes)
    throw CommError("rank " + std::to_string(options_.rank) + ": " + where() + " answered a value of " +
                    std::to_string(n) + " bytes for " + wait);
  return read_exactly(static_cast<size_t>(n), deadline, wait);
}

std::string TorchStoreClient::read_exactly(size_t n, tcp::Clock::time_point deadline, std::string_view what) {
  const auto start = tcp::Clock::now();
  while (in_.size() < n) {
    switch (tcp::read_some(fd_.get(), in_, deadline, where(), n - in_.size())) {
      case tcp::ReadStatus::Data: break;
      case tcp::ReadStatus::Eof:
        throw CommError("rank " + std::to_string(options_.rank) + ": " + where() +
                        " closed the connection (did torchrun's agent exit?) while answering " + std::string(what));
      case tcp::ReadStatus::Timeout:
        throw CommError("rank " + std::to_string(options_.rank) + ": timed out after " +
                        std::to_string(tcp::ms_between(start, tcp::Clock::now())) + " ms waiting for " + where() +
                        " to answer " + std::string(what));
    }
  }
  std::string out = in_.substr(0, n);
  in_.erase(0, n);
  return out;
}

}  // namespace meshtrain::comm::rendezvous
