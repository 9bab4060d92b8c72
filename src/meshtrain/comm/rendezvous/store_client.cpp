#include "meshtrain/comm/rendezvous/store_client.hpp"

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::rendezvous {

StoreClient::StoreClient(StoreClientOptions options) : options_(std::move(options)) {
  const auto deadline = tcp::Clock::now() + options_.timeout;
  const std::string what = "the rendezvous store (rank 0)";
  fd_ = tcp::connect_with_retry(options_.store, deadline, what);
  HelloInfo hello{options_.rank, options_.world_size, options_.job_id};
  request(FrameType::Hello, options_.token, encode_hello_value(hello));
}

void StoreClient::set(std::string_view key, std::string_view value) { request(FrameType::Set, key, value); }

std::string StoreClient::get(std::string_view key) { return request(FrameType::Get, key, ""); }

void StoreClient::wait(std::span<const std::string> keys) {
  for (const std::string& key : keys) get(key);
}

std::string StoreClient::request(FrameType type, std::string_view key, std::string_view value) {
  const auto start = tcp::Clock::now();
  const auto deadline = start + options_.timeout;
  const std::string where = "the rendezvous store at " + options_.store.str();
  const std::string me = "rank " + std::to_string(options_.rank);
  tcp::write_all(fd_.get(), encode_frame(type, key, value), deadline, where);
  for (;;) {
    const DecodeResult r = decode_frame(in_);
    if (r.status == DecodeStatus::Invalid) throw CommError(me + ": malformed reply from " + where + ": " + r.error);
    if (r.status == DecodeStatus::Complete) {
      std::string reply_value(r.frame.value);
      const FrameType reply_type = r.frame.type;
      in_.erase(0, r.consumed);
      if (reply_type == FrameType::Error) throw CommError(me + ": " + where + " answered: " + reply_value);
      if (reply_type != (type == FrameType::Get ? FrameType::Value : FrameType::Ok))
        throw CommError(me + ": unexpected " + std::string(frame_type_name(reply_type)) + " reply from " + where);
      return reply_value;
    }
    switch (tcp::read_some(fd_.get(), in_, deadline, where)) {
      case tcp::ReadStatus::Data: break;
      case tcp::ReadStatus::Eof:
        throw CommError(me + ": " + where + " closed the connection" +
                        (type == FrameType::Hello ? " during the handshake (wrong token or job id?)" : ""));
      case tcp::ReadStatus::Timeout:
        throw CommError(me + ": timed out after " + std::to_string(tcp::ms_between(start, tcp::Clock::now())) +
                        " ms waiting for " + where + " to answer " + std::string(frame_type_name(type)) +
                        (key.empty() || type == FrameType::Hello ? "" : " '" + std::string(key) + "'"));
    }
  }
}

}  // namespace meshtrain::comm::rendezvous
