#pragma once
// A transport whose ranks are threads of one process. All ranks share one
// InprocHub that holds a bounded FIFO queue per ordered pair (src -> dst).
// It has the same semantics as shm and tcp (ordered per pair, length check,
// reduce-on-receive, timeouts and departed peers reported by rank), so the
// collective test matrix runs fast with threads as ranks, as Gloo's tests do.
//
// Failure: a rank whose transport is destroyed, or whose exchange() threw,
// is marked gone in the hub; a peer waiting on it gets a CommError at once
// instead of waiting for its timeout. Messages it sent before are still
// delivered.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "meshtrain/comm/transport/transport.hpp"

namespace meshtrain::comm {

struct InprocOptions {
  TransportOptions transport;
  // Bytes queued per ordered pair before a sender waits; a single larger
  // message is still accepted into an empty queue.
  size_t queue_capacity_bytes = size_t{4} << 20;
};

class InprocHub {
 public:
  InprocHub(int world_size, InprocOptions options = {});
  int size() const { return size_; }
  const InprocOptions& options() const { return options_; }

 private:
  friend class InprocTransport;
  struct Message {
    std::unique_ptr<std::byte[]> bytes;
    size_t size = 0;
  };
  struct PairQueue {  // messages src -> dst
    std::deque<Message> messages;
    size_t queued_bytes = 0;
  };
  PairQueue& queue(int src, int dst) { return queues_[size_t(src) * size_t(size_) + size_t(dst)]; }

  const int size_;
  const InprocOptions options_;
  std::mutex mutex_;
  std::vector<std::condition_variable> wakeup_;  // one per rank: "a queue you wait on changed"
  std::vector<PairQueue> queues_;
  std::vector<std::string> gone_;  // per rank: empty while alive, else why it left
  std::vector<bool> attached_;
};

class InprocTransport final : public Transport {
 public:
  // Attaches `rank` to the hub; a rank may be attached once.
  InprocTransport(std::shared_ptr<InprocHub> hub, int rank);
  ~InprocTransport() override;
  InprocTransport(const InprocTransport&) = delete;
  InprocTransport& operator=(const InprocTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return hub_->size(); }
  std::string_view name() const override { return "inproc"; }
  void exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs) override;

 private:
  struct PendingExchange;  // one exchange()'s operations and which are done (inproc_transport.cpp)

  [[noreturn]] void fail(std::unique_lock<std::mutex>& lock, const std::string& why);
  void run_exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs);
  void check_peers(std::span<const SendOp> sends, std::span<const RecvOp> recvs) const;
  // One pass over the pending sends, then the receives, with the hub locked;
  // true when any completed.
  bool post_sends(std::unique_lock<std::mutex>& lock, PendingExchange& x);
  bool take_receives(std::unique_lock<std::mutex>& lock, PendingExchange& x);
  void fail_if_sender_gone(std::unique_lock<std::mutex>& lock, const PendingExchange& x);
  [[noreturn]] void fail_timed_out(std::unique_lock<std::mutex>& lock, const PendingExchange& x);

  std::shared_ptr<InprocHub> hub_;
  int rank_;
};

// One transport per rank of a fresh hub: transports[r].rank() == r.
std::vector<std::unique_ptr<Transport>> make_inproc_transports(int world_size, InprocOptions options = {});

}  // namespace meshtrain::comm
