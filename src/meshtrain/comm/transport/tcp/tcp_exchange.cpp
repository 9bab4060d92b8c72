#include "meshtrain/comm/transport/tcp/tcp_exchange.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::tcp {
namespace {

// Bytes one visit to a peer may move before the others get a turn, so one
// fast stream cannot starve the rest of an exchange.
constexpr size_t kVisitBudget = size_t{8} << 20;

void put_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint64_t get_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

std::string rank_name(int r) { return "rank " + std::to_string(r); }

}  // namespace

TcpTransport::TcpTransport(int rank, std::vector<Fd> peers, TransportOptions options)
    : rank_(rank), peers_(std::move(peers)), options_(options), work_(peers_.size()) {
  if (peers_.size() > 1) staging_.resize(kStagingBytes);
}

void TcpTransport::exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs) {
  if (!broken_.empty())
    throw CommError(rank_name(rank_) + ": tcp transport is unusable after an earlier error: " + broken_);
  validate(sends, recvs);
  try {
    run(sends, recvs);
  } catch (const CommError& e) {
    broken_ = e.what();
    send_abort_notices(broken_);
    throw;
  }
}

void TcpTransport::send_abort_notices(const std::string& reason) {
  const std::string text = reason.substr(0, kMaxAbortText);
  unsigned char header[kDataHeaderBytes] = {};
  put_u32(header, kAbortFrameMagic);
  put_u32(header + 8, static_cast<uint32_t>(text.size()));
  for (int peer = 0; peer < size(); ++peer) {
    if (peer == rank_) continue;
    const PeerWork& w = work_[peer];
    if (w.next_send < w.sends.size() && w.sends[w.next_send].sent > 0) continue;  // mid-message
    iovec iov[2] = {{header, kDataHeaderBytes}, {const_cast<char*>(text.data()), text.size()}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    // A peer that is gone or whose buffer is full learns it from the closed
    // connection instead.
    (void)::sendmsg(peers_[peer].get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
}

void TcpTransport::relay_abort(int peer, uint64_t length) {
  if (length > kMaxAbortText)
    throw CommError(rank_name(rank_) + ": malformed abort frame from " + rank_name(peer) + " (" +
                    std::to_string(length) + " bytes of text)");
  std::string text(length, '\0');
  size_t got = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  while (got < length) {
    const ssize_t n = ::recv(peers_[peer].get(), text.data() + got, length - got, MSG_DONTWAIT);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    pollfd fd{peers_[peer].get(), POLLIN, 0};
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) || poll_until(&fd, 1, deadline) == 0) break;
  }
  text.resize(got);
  throw CommError(rank_name(peer) + " gave up" + (text.empty() ? " (its reason did not arrive)" : ": " + text));
}

void TcpTransport::validate(std::span<const SendOp> sends, std::span<const RecvOp> recvs) const {
  auto check_peer = [&](int peer, const void* data, size_t bytes, const char* kind) {
    if (peer < 0 || peer >= size())
      throw CommError(rank_name(rank_) + ": " + kind + " peer " + std::to_string(peer) + " is outside [0, " +
                      std::to_string(size()) + ")");
    if (peer == rank_) throw CommError(rank_name(rank_) + ": " + kind + " to itself");
    if (data == nullptr && bytes > 0) throw CommError(rank_name(rank_) + ": " + kind + " of a null buffer");
  };
  for (const SendOp& s : sends) check_peer(s.peer, s.data, s.bytes, "send");
  for (const RecvOp& r : recvs) {
    check_peer(r.peer, r.data, r.bytes, "receive");
    if (r.reduce && r.bytes % dtype_bytes(r.reduce->dtype) != 0)
      throw CommError(rank_name(rank_) + ": reducing receive of " + std::to_string(r.bytes) +
                      " bytes is not a whole number of " + std::string(dtype_name(r.reduce->dtype)));
  }
}

void TcpTransport::run(std::span<const SendOp> sends, std::span<const RecvOp> recvs) {
  const auto start = Clock::now();
  const auto deadline = start + options_.timeout;
  for (PeerWork& w : work_) {
    w.sends.clear();
    w.recvs.clear();
    w.next_send = w.next_recv = 0;
  }
  for (const SendOp& s : sends) {
    SendState st;
    st.op = &s;
    put_u32(st.header, kDataFrameMagic);
    put_u32(st.header + 4, 0);
    put_u32(st.header + 8, static_cast<uint32_t>(s.bytes));
    put_u32(st.header + 12, static_cast<uint32_t>(static_cast<uint64_t>(s.bytes) >> 32));
    work_[s.peer].sends.push_back(st);
  }
  for (const RecvOp& r : recvs) {
    RecvState st;
    st.op = &r;
    work_[r.peer].recvs.push_back(st);
  }

  for (int peer = 0; peer < size(); ++peer) {  // optimistic first pass: most sockets can move at once
    progress_sends(peer);
    progress_recvs(peer);
  }
  for (;;) {
    poll_fds_.clear();
    poll_peers_.clear();
    for (int peer = 0; peer < size(); ++peer) {
      const PeerWork& w = work_[peer];
      if (w.done()) continue;
      const short events = static_cast<short>((w.next_send < w.sends.size() ? POLLOUT : 0) |
                                              (w.next_recv < w.recvs.size() ? POLLIN : 0));
      poll_fds_.push_back({peers_[peer].get(), events, 0});
      poll_peers_.push_back(peer);
    }
    if (poll_fds_.empty()) return;
    if (poll_until(poll_fds_.data(), poll_fds_.size(), deadline) == 0)
      throw CommError(rank_name(rank_) + ": tcp exchange timed out after " +
                      std::to_string(ms_between(start, Clock::now())) + " ms; still pending: " + pending_summary());
    for (size_t i = 0; i < poll_fds_.size(); ++i) {
      if (!poll_fds_[i].revents) continue;
      progress_sends(poll_peers_[i]);
      progress_recvs(poll_peers_[i]);
    }
  }
}

void TcpTransport::progress_sends(int peer) {
  PeerWork& w = work_[peer];
  size_t budget = kVisitBudget;
  while (w.next_send < w.sends.size() && budget > 0) {
    SendState& s = w.sends[w.next_send];
    const size_t total = kDataHeaderBytes + s.op->bytes;
    iovec iov[2];
    int n_iov = 0;
    if (s.sent < kDataHeaderBytes) iov[n_iov++] = {s.header + s.sent, kDataHeaderBytes - s.sent};
    const size_t payload_sent = s.sent > kDataHeaderBytes ? s.sent - kDataHeaderBytes : 0;
    if (payload_sent < s.op->bytes)
      iov[n_iov++] = {const_cast<char*>(static_cast<const char*>(s.op->data)) + payload_sent,
                      std::min(s.op->bytes - payload_sent, budget)};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n_iov);
    const ssize_t n = ::sendmsg(peers_[peer].get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EPIPE || errno == ECONNRESET)
        peer_closed(peer, "sending " + std::to_string(s.op->bytes) + " bytes to it");
      throw CommError(rank_name(rank_) + ": sending to " + rank_name(peer) + " failed: " + errno_text(errno));
    }
    s.sent += static_cast<size_t>(n);
    budget -= std::min(budget, static_cast<size_t>(n));
    if (s.sent == total) ++w.next_send;
  }
}

void TcpTransport::progress_recvs(int peer) {
  PeerWork& w = work_[peer];
  size_t budget = kVisitBudget;
  while (w.next_recv < w.recvs.size() && budget > 0) {
    RecvState& r = w.recvs[w.next_recv];
    const RecvOp& op = *r.op;
    if (r.header_got < kDataHeaderBytes) {
      const size_t n = read_from(peer, r.header + r.header_got, kDataHeaderBytes - r.header_got, r);
      if (n == 0) return;
      r.header_got += n;
      if (r.header_got == kDataHeaderBytes) check_header(peer, r);
    } else if (op.reduce == nullptr) {
      const size_t n = read_from(peer, static_cast<char*>(op.data) + r.got, std::min(op.bytes - r.got, budget), r);
      if (n == 0) return;
      r.got += n;
      budget -= std::min(budget, n);
    } else {
      // staging = carry | new bytes; fold the whole elements, keep the rest as carry.
      std::memcpy(staging_.data(), r.carry, r.carry_len);
      const size_t room = std::min(op.bytes - r.got, staging_.size() - r.carry_len);
      const size_t n = read_from(peer, staging_.data() + r.carry_len, room, r);
      if (n == 0) return;
      r.got += n;
      budget -= std::min(budget, n);
      const size_t have = r.carry_len + n;
      const size_t whole = have - have % dtype_bytes(op.reduce->dtype);
      reduce_into(static_cast<char*>(op.data) + r.reduced, staging_.data(), whole, *op.reduce);
      r.reduced += whole;
      r.carry_len = have - whole;
      std::memcpy(r.carry, staging_.data() + whole, r.carry_len);
    }
    if (r.header_got == kDataHeaderBytes && r.got == op.bytes) ++w.next_recv;
  }
}

size_t TcpTransport::read_from(int peer, void* dst, size_t bytes, const RecvState& r) {
  for (;;) {
    const ssize_t n = ::recv(peers_[peer].get(), dst, bytes, MSG_DONTWAIT);
    if (n > 0) return static_cast<size_t>(n);
    const std::string doing = "receiving " + std::to_string(r.op->bytes) + " bytes from it (" +
                              std::to_string(r.got) + " received)";
    if (n == 0) peer_closed(peer, doing);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno == ECONNRESET) peer_closed(peer, doing);
    throw CommError(rank_name(rank_) + ": receiving from " + rank_name(peer) + " failed: " + errno_text(errno));
  }
}

void TcpTransport::check_header(int peer, const RecvState& r) {
  const auto magic = static_cast<uint32_t>(get_le(r.header, 4));
  if (magic == kAbortFrameMagic) relay_abort(peer, get_le(r.header + 8, 8));
  if (magic != kDataFrameMagic) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08x", magic);
    throw CommError(rank_name(rank_) + ": malformed data frame from " + rank_name(peer) + " (magic " + hex +
                    "); the connection is out of step");
  }
  const uint64_t length = get_le(r.header + 8, 8);
  if (length != r.op->bytes)
    throw CommError("message length mismatch: " + rank_name(peer) + " sent " + std::to_string(length) + " bytes but " +
                    rank_name(rank_) + " posted a receive of " + std::to_string(r.op->bytes) + " bytes");
}

void TcpTransport::peer_closed(int peer, const std::string& doing) const {
  throw CommError(rank_name(peer) + " closed the connection (died?) while " + rank_name(rank_) + " was " + doing);
}

std::string TcpTransport::pending_summary() const {
  std::string out;
  for (int peer = 0; peer < size(); ++peer) {
    const PeerWork& w = work_[peer];
    if (w.next_recv < w.recvs.size()) {
      const RecvState& r = w.recvs[w.next_recv];
      out += (out.empty() ? "" : ", ") + std::string("receive from ") + rank_name(peer) + " (" +
             std::to_string(r.got) + " of " + std::to_string(r.op->bytes) + " bytes)";
    }
    if (w.next_send < w.sends.size()) {
      const SendState& s = w.sends[w.next_send];
      const size_t payload = s.sent > kDataHeaderBytes ? s.sent - kDataHeaderBytes : 0;
      out += (out.empty() ? "" : ", ") + std::string("send to ") + rank_name(peer) + " (" +
             std::to_string(payload) + " of " + std::to_string(s.op->bytes) + " bytes)";
    }
  }
  return out;
}

}  // namespace meshtrain::comm::tcp
