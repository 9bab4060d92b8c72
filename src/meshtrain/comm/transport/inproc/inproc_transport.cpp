#include "meshtrain/comm/transport/inproc/inproc_transport.hpp"

#include <algorithm>
#include <cstring>

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {
namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

}  // namespace

InprocHub::InprocHub(int world_size, InprocOptions options)
    : size_(world_size), options_(options) {
  if (world_size < 1) throw CommError("inproc hub: world size must be at least 1, got " + std::to_string(world_size));
  wakeup_ = std::vector<std::condition_variable>(size_t(size_));
  queues_ = std::vector<PairQueue>(static_cast<size_t>(size_) * static_cast<size_t>(size_));
  gone_.resize(size_t(size_));
  attached_.resize(size_t(size_), false);
}

InprocTransport::InprocTransport(std::shared_ptr<InprocHub> hub, int rank) : hub_(std::move(hub)), rank_(rank) {
  if (rank < 0 || rank >= hub_->size())
    throw CommError("inproc: rank " + std::to_string(rank) + " is outside the world of " + std::to_string(hub_->size()));
  std::lock_guard lock(hub_->mutex_);
  if (hub_->attached_[size_t(rank)]) throw CommError("inproc: rank " + std::to_string(rank) + " is already attached");
  hub_->attached_[size_t(rank)] = true;
}

InprocTransport::~InprocTransport() {
  std::lock_guard lock(hub_->mutex_);
  if (hub_->gone_[size_t(rank_)].empty()) hub_->gone_[size_t(rank_)] = "closed its transport";
  for (auto& cv : hub_->wakeup_) cv.notify_all();
}

void InprocTransport::fail(std::unique_lock<std::mutex>& lock, const std::string& why) {
  lock.unlock();
  throw CommError("inproc rank " + std::to_string(rank_) + ": " + why);
}

void InprocTransport::exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs) {
  try {
    run_exchange(sends, recvs);
  } catch (const std::exception& e) {
    // A rank whose exchange failed is out of step with its peers: mark it
    // gone so they fail now rather than at their timeout.
    std::lock_guard lock(hub_->mutex_);
    if (hub_->gone_[size_t(rank_)].empty()) hub_->gone_[size_t(rank_)] = std::string("failed: ") + e.what();
    for (auto& cv : hub_->wakeup_) cv.notify_all();
    throw;
  }
}

// The state of one exchange() call. Sends are copied out of the caller's
// buffers before anything is queued, so the caller may reuse them as soon as
// exchange() returns.
struct InprocTransport::PendingExchange {
  PendingExchange(std::span<const SendOp> sends_, std::span<const RecvOp> recvs_, int world_size)
      : sends(sends_),
        recvs(recvs_),
        outgoing(sends_.size()),
        send_done(sends_.size(), false),
        recv_done(recvs_.size(), false),
        sends_left(sends_.size()),
        recvs_left(recvs_.size()),
        blocked(static_cast<size_t>(world_size)) {
    for (size_t i = 0; i < sends.size(); ++i) {
      outgoing[i].size = sends[i].bytes;
      if (sends[i].bytes) {
        outgoing[i].bytes = std::make_unique_for_overwrite<std::byte[]>(sends[i].bytes);
        if (sends[i].bytes != 0) std::memcpy(outgoing[i].bytes.get(), sends[i].data, sends[i].bytes);
      }
    }
  }
  bool finished() const { return sends_left + recvs_left == 0; }

  std::span<const SendOp> sends;
  std::span<const RecvOp> recvs;
  std::vector<InprocHub::Message> outgoing;  // per send: its copy, until queued
  std::vector<bool> send_done, recv_done;
  size_t sends_left, recvs_left;
  std::vector<char> blocked;  // per peer: an earlier op to it is still pending this pass
};

void InprocTransport::run_exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs) {
  check_peers(sends, recvs);
  PendingExchange x(sends, recvs, hub_->size());
  const auto timeout = hub_->options().transport.timeout;
  std::unique_lock lock(hub_->mutex_);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!x.finished()) {
    const bool sent = post_sends(lock, x);
    const bool received = take_receives(lock, x);
    if (sent || received) {
      deadline = std::chrono::steady_clock::now() + timeout;
      continue;
    }
    fail_if_sender_gone(lock, x);
    if (std::chrono::steady_clock::now() >= deadline) fail_timed_out(lock, x);
    hub_->wakeup_[size_t(rank_)].wait_until(lock, deadline);
  }
}

void InprocTransport::check_peers(std::span<const SendOp> sends, std::span<const RecvOp> recvs) const {
  const int n = hub_->size();
  for (const SendOp& op : sends)
    if (op.peer < 0 || op.peer >= n || op.peer == rank_)
      throw CommError("inproc rank " + std::to_string(rank_) + ": invalid send peer " + std::to_string(op.peer) +
                      " in a world of " + std::to_string(n));
  for (const RecvOp& op : recvs)
    if (op.peer < 0 || op.peer >= n || op.peer == rank_)
      throw CommError("inproc rank " + std::to_string(rank_) + ": invalid receive peer " + std::to_string(op.peer) +
                      " in a world of " + std::to_string(n));
}

bool InprocTransport::post_sends(std::unique_lock<std::mutex>& lock, PendingExchange& x) {
  InprocHub& hub = *hub_;
  bool progressed = false;
  std::fill(x.blocked.begin(), x.blocked.end(), 0);
  for (size_t i = 0; i < x.sends.size(); ++i) {
    const int peer = x.sends[i].peer;
    if (x.send_done[i] || x.blocked[size_t(peer)]) continue;
    if (!hub.gone_[size_t(peer)].empty())
      fail(lock, "cannot send to rank " + std::to_string(peer) + ", which " + hub.gone_[size_t(peer)]);
    InprocHub::PairQueue& queue = hub.queue(rank_, peer);
    const size_t size = x.outgoing[i].size;
    if (!queue.messages.empty() && queue.queued_bytes + size > hub.options().queue_capacity_bytes) {
      x.blocked[size_t(peer)] = 1;  // full: keep later sends to this peer behind this one
      continue;
    }
    queue.messages.push_back(std::move(x.outgoing[i]));
    queue.queued_bytes += size;
    hub.wakeup_[size_t(peer)].notify_all();
    x.send_done[i] = true;
    --x.sends_left;
    progressed = true;
  }
  return progressed;
}

bool InprocTransport::take_receives(std::unique_lock<std::mutex>& lock, PendingExchange& x) {
  InprocHub& hub = *hub_;
  bool progressed = false;
  std::fill(x.blocked.begin(), x.blocked.end(), 0);
  for (size_t i = 0; i < x.recvs.size(); ++i) {
    const RecvOp& op = x.recvs[i];
    if (x.recv_done[i] || x.blocked[size_t(op.peer)]) continue;
    InprocHub::PairQueue& queue = hub.queue(op.peer, rank_);
    if (queue.messages.empty()) {
      x.blocked[size_t(op.peer)] = 1;
      continue;
    }
    InprocHub::Message message = std::move(queue.messages.front());
    queue.messages.pop_front();
    queue.queued_bytes -= message.size;
    hub.wakeup_[size_t(op.peer)].notify_all();  // the sender may be waiting for room
    if (message.size != op.bytes)
      fail(lock, "message from rank " + std::to_string(op.peer) + " has " + std::to_string(message.size) +
                     " bytes but the receive expects " + std::to_string(op.bytes) +
                     " (mismatched buffer sizes across ranks)");
    lock.unlock();  // copy or reduce while other ranks use the hub
    if (op.bytes) {
      if (op.reduce)
        reduce_into(op.data, message.bytes.get(), op.bytes, *op.reduce);
      else
        if (op.bytes != 0) std::memcpy(op.data, message.bytes.get(), op.bytes);
    }
    message.bytes.reset();
    lock.lock();
    x.recv_done[i] = true;
    --x.recvs_left;
    progressed = true;
  }
  return progressed;
}

// Called when nothing moved: a peer that is gone and left nothing queued for
// us will never satisfy the receive.
void InprocTransport::fail_if_sender_gone(std::unique_lock<std::mutex>& lock, const PendingExchange& x) {
  InprocHub& hub = *hub_;
  for (size_t i = 0; i < x.recvs.size(); ++i) {
    const int peer = x.recvs[i].peer;
    if (!x.recv_done[i] && !hub.gone_[size_t(peer)].empty() && hub.queue(peer, rank_).messages.empty())
      fail(lock, "cannot receive from rank " + std::to_string(peer) + ", which " + hub.gone_[size_t(peer)]);
  }
}

// Names the peers still waited on, both ways.
void InprocTransport::fail_timed_out(std::unique_lock<std::mutex>& lock, const PendingExchange& x) {
  std::vector<int> recv_peers, send_peers;
  for (size_t i = 0; i < x.recvs.size(); ++i)
    if (!x.recv_done[i]) recv_peers.push_back(x.recvs[i].peer);
  for (size_t i = 0; i < x.sends.size(); ++i)
    if (!x.send_done[i]) send_peers.push_back(x.sends[i].peer);
  std::string why =
      "timed out after " + std::to_string(hub_->options().transport.timeout.count()) + " ms without progress;";
  if (!recv_peers.empty()) why += " waiting to receive from rank(s) " + rank_list(recv_peers) + ";";
  if (!send_peers.empty()) why += " waiting for room to send to rank(s) " + rank_list(send_peers) + ";";
  why.pop_back();
  fail(lock, why);
}

std::vector<std::unique_ptr<Transport>> make_inproc_transports(int world_size, InprocOptions options) {
  auto hub = std::make_shared<InprocHub>(world_size, options);
  std::vector<std::unique_ptr<Transport>> transports;
  for (int r = 0; r < world_size; ++r) transports.push_back(std::make_unique<InprocTransport>(hub, r));
  return transports;
}

}  // namespace meshtrain::comm
