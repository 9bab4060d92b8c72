#include "meshtrain/parallel/parameter_server/connection.hpp"

#include <cstring>

#include "meshtrain/core/error.hpp"

namespace meshtrain::parallel::ps {

namespace tcp = comm::tcp;

Connection::Connection(tcp::Fd fd, std::string peer) : fd_(std::move(fd)), peer_(std::move(peer)) {
  tcp::set_nonblocking(fd_.get());
  tcp::tune_data_socket(fd_.get());
}

void Connection::send(Kind kind, int32_t rank, int64_t step, int64_t clock, std::string_view payload,
                      Clock::time_point deadline) {
  // Header and payload go out as two writes: the payload (a whole shard) is
  // not copied into a message buffer.
  const Header h = make_header(kind, rank, step, clock, payload.size());
  tcp::write_all(fd_.get(), std::string_view(reinterpret_cast<const char*>(&h), kHeaderBytes), deadline, peer_);
  if (!payload.empty()) tcp::write_all(fd_.get(), payload, deadline, peer_);
}

Connection::Status Connection::receive(Message& out, Clock::time_point deadline) {
  for (;;) {
    if (in_.size() >= kHeaderBytes) {
      std::string error;
      auto h = decode_header(in_, error);
      if (!h) throw CommError("corrupt message from " + peer_ + ": " + error);
      const size_t total = kHeaderBytes + h->payload_bytes;
      if (in_.size() >= total) {
        out.header = *h;
        out.payload.assign(in_, kHeaderBytes, h->payload_bytes);
        in_.erase(0, total);
        return Status::Message;
      }
      // Grow once to the whole message, so a large payload is not re-copied
      // on every read.
      in_.reserve(total);
    }
    switch (tcp::read_some(fd_.get(), in_, deadline, peer_)) {
      case tcp::ReadStatus::Data: break;
      case tcp::ReadStatus::Eof: return Status::Eof;
      case tcp::ReadStatus::Timeout: return Status::Timeout;
    }
  }
}

}  // namespace meshtrain::parallel::ps
