#pragma once
// One TCP connection carrying parameter-server messages (protocol.hpp), with
// every read and write bounded by a deadline.
#include <string>
#include <string_view>

#include "meshtrain/comm/transport/tcp/socket.hpp"
#include "meshtrain/parallel/parameter_server/protocol.hpp"

namespace meshtrain::parallel::ps {

using Clock = comm::tcp::Clock;

class Connection {
 public:
  // Takes the socket (made non-blocking and tuned); `peer` names the other
  // side in errors ("parameter server 1 at 127.0.0.1:29600").
  Connection(comm::tcp::Fd fd, std::string peer);

  // Throws CommError naming the peer on timeout, reset or a closed connection.
  void send(Kind kind, int32_t rank, int64_t step, int64_t clock, std::string_view payload,
            Clock::time_point deadline);

  enum class Status { Message, Eof, Timeout };
  // Reads one whole message into `out`. Eof: the peer closed (or reset) the
  // connection. Timeout: none complete by the deadline; bytes read so far are
  // kept for the next call. A corrupt stream throws CommError.
  Status receive(Message& out, Clock::time_point deadline);

  const std::string& peer() const { return peer_; }

 private:
  comm::tcp::Fd fd_;
  std::string peer_;
  std::string in_;  // bytes read but not yet returned as a message
};

}  // namespace meshtrain::parallel::ps
