#pragma once
// The TCP transport's exchange(): progresses every posted send and receive
// together over non-blocking sockets, sleeping in poll() only when no socket
// can move.
//
// Data frame: one message, sent as a 16-byte header
//   u32 magic "MTDF" | u32 reserved (0) | u64 payload length   (little-endian)
// followed by the payload. Messages to one peer go out in posted order and
// are matched to that peer's receives in posted order. The receiver checks
// the magic (a corrupt stream cannot be resynchronised, so it is an error)
// and that the length equals its posted receive; a mismatch is a CommError
// naming both ranks and both lengths, never a truncation.
//
// Reducing receive: payload bytes land in `staging` (allocated once), whole
// elements are folded into the destination with reduce_into(), and the
// fraction of an element a read may end on (carry) waits for the next read.
//
// After any error the stream state is unknown, so the transport refuses every
// later exchange with the first error's message. Before it gives up it tells
// every other peer why, with an abort frame where that peer's stream is at a
// frame boundary (a half-sent message cannot be cut into):
//   u32 magic "MTAB" | u32 reserved (0) | u64 text length (<= 1024) | text
// A rank that reads one fails with "rank P gave up: <P's reason>", so ranks
// that never talked to a dead peer still name it (the reason travels on).
#include <poll.h>

#include <string>
#include <vector>

#include "meshtrain/comm/transport/tcp/socket.hpp"
#include "meshtrain/comm/transport/transport.hpp"

namespace meshtrain::comm::tcp {

inline constexpr uint32_t kDataFrameMagic = 0x4644544Du;   // "MTDF" as little-endian
inline constexpr uint32_t kAbortFrameMagic = 0x4241544Du;  // "MTAB"
inline constexpr size_t kMaxAbortText = 1024;
inline constexpr size_t kDataHeaderBytes = 16;
inline constexpr size_t kStagingBytes = size_t{4} << 20;

class TcpTransport final : public Transport {
 public:
  // `peers[r]` is the connected socket to rank r (empty for this rank).
  TcpTransport(int rank, std::vector<Fd> peers, TransportOptions options);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(peers_.size()); }
  std::string_view name() const override { return "tcp"; }
  void exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs) override;

 private:
  struct SendState {
    const SendOp* op = nullptr;
    unsigned char header[kDataHeaderBytes] = {};
    size_t sent = 0;  // header and payload bytes written
  };
  struct RecvState {
    const RecvOp* op = nullptr;
    unsigned char header[kDataHeaderBytes] = {};
    size_t header_got = 0;
    size_t got = 0;      // payload bytes read
    size_t reduced = 0;  // payload bytes folded into op->data (reducing receives)
    unsigned char carry[8] = {};
    size_t carry_len = 0;
  };
  // The posted operations of one exchange with one peer, in order.
  struct PeerWork {
    std::vector<SendState> sends;
    size_t next_send = 0;
    std::vector<RecvState> recvs;
    size_t next_recv = 0;
    bool done() const { return next_send == sends.size() && next_recv == recvs.size(); }
  };

  void validate(std::span<const SendOp> sends, std::span<const RecvOp> recvs) const;
  void run(std::span<const SendOp> sends, std::span<const RecvOp> recvs);
  void progress_sends(int peer);
  void progress_recvs(int peer);
  void check_header(int peer, const RecvState& r);
  // Reads into `dst`; returns bytes read, 0 when the socket has nothing now.
  size_t read_from(int peer, void* dst, size_t bytes, const RecvState& r);
  [[noreturn]] void peer_closed(int peer, const std::string& doing) const;
  // Best effort, never blocks: an abort frame with `reason` to every peer
  // whose outgoing stream is at a frame boundary.
  void send_abort_notices(const std::string& reason);
  // After an abort frame's header: reads its text (waiting up to a second)
  // and throws the CommError that relays it.
  [[noreturn]] void relay_abort(int peer, uint64_t length);
  std::string pending_summary() const;

  int rank_;
  std::vector<Fd> peers_;
  TransportOptions options_;
  std::vector<unsigned char> staging_;
  std::vector<PeerWork> work_;  // per peer; kept between exchanges to reuse capacity
  std::vector<pollfd> poll_fds_;  // the sockets an exchange still waits on; reused likewise
  std::vector<int> poll_peers_;   // poll_fds_[i] is the socket of peer poll_peers_[i]
  std::string broken_;          // the first error; every later exchange rethrows it
};

}  // namespace meshtrain::comm::tcp
