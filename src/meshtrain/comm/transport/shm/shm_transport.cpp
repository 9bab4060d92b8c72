// ShmTransport: the progress engine over the rings of ring.hpp.
//
// exchange() turns each posted op into a PendingSend/PendingRecv and runs
// passes until all are done. A pass gives every op that may move one chunk
// of progress (one slot filled or emptied, or one piece of a single-copy
// message read), round-robin, so a rank that
// sends to its right and receives from its left never blocks on a full ring
// while its own receive could drain the other one. Ops to the same peer move
// in the order posted (the first unfinished one only): that order is the
// message order on the ring (a send whose single-copy descriptor is out no
// longer holds up the next one). A pass with no progress enters the backoff of
// waiter.hpp, which also checks the job abort flag, the deadline and the
// liveness of the peers still pending.
#include "meshtrain/comm/transport/shm/shm_transport.hpp"

#include <sched.h>
#include <unistd.h>
#include <cstring>
#include <vector>

#include "meshtrain/comm/transport/shm/process.hpp"
#include "meshtrain/comm/transport/shm/ring.hpp"
#include "meshtrain/comm/transport/shm/segment.hpp"
#include "meshtrain/comm/transport/shm/waiter.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {
namespace {

using Clock = std::chrono::steady_clock;
using namespace shm;

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return CPU_COUNT(&set);
}

class ShmTransport final : public Transport {
 public:
  explicit ShmTransport(const ShmOptions& o)
      : segment_(o), rank_(o.rank), world_(o.world_size), timeout_(o.transport.timeout),
        // More ranks than cores (as OpenMPI's yield_when_idle): a spinning
        // rank would only delay the peer it waits for, so yield at once.
        spin_window_(o.world_size <= usable_cpus() ? kSpinWindow : std::chrono::microseconds(0)),
        untimed_passes_(spin_window_.count() > 0 ? kUntimedSpinPasses : 0),
        single_copy_bytes_(o.single_copy_bytes), bounce_(kSingleCopyPieceBytes),
        last_pass_(size_t(o.world_size), 0), sent_to_(size_t(o.world_size), 0) {
    for (int peer = 0; peer < world_; ++peer) {
      if (peer == rank_) continue;
      out_.emplace_back(segment_, rank_, peer);
      in_.emplace_back(segment_, peer, rank_, bounce_.data());
    }
  }

  ~ShmTransport() override { close(); }

  int rank() const override { return rank_; }
  int size() const override { return world_; }
  std::string_view name() const override { return "shm"; }

  void exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs) override {
    if (broken_) {
      throw CommError("shm transport of rank " + std::to_string(rank_) +
                      " is unusable after an earlier error");
    }
    post(sends, recvs);
    try {
      segment_.check_abort();
      progress_until_done();
    } catch (...) {
      broken_ = true;
      // Before our caller frees the buffers of our sends: a peer reading one
      // single-copy sees this and fails instead of taking what follows.
      close();
      throw;
    }
  }

 private:
  void close() {
    segment_.entry(rank_).closed.store(1, std::memory_order_seq_cst);
    for (int peer = 0; peer < world_; ++peer) {
      if (peer != rank_) wake_if_sleeping(segment_.entry(peer));
    }
  }

  size_t ring_of(int peer) const { return size_t(peer < rank_ ? peer : peer - 1); }
  std::string who() const { return "rank " + std::to_string(rank_); }

  void check_peer(int peer, const char* what) const {
    if (peer < 0 || peer >= world_ || peer == rank_) {
      throw CommError(who() + ": " + what + " peer " + std::to_string(peer) +
                      " is not another rank of a world of " + std::to_string(world_));
    }
  }

  void post(std::span<const SendOp> sends, std::span<const RecvOp> recvs) {
    sends_.clear();
    recvs_.clear();
    for (const SendOp& op : sends) {
      check_peer(op.peer, "send");
      if (op.data == nullptr && op.bytes != 0) throw CommError(who() + ": send of null data");
      sends_.push_back(PendingSend{op.peer, static_cast<const char*>(op.data), op.bytes});
    }
    // Single-copy pays where an exchange streams much data to one peer (see
    // ShmOptions::single_copy_bytes).
    for (const PendingSend& s : sends_) sent_to_[s.peer] += s.bytes;
    for (PendingSend& s : sends_) {
      s.single_copy = single_copy_bytes_ != 0 && sent_to_[s.peer] >= single_copy_bytes_ && s.bytes != 0;
    }
    for (const PendingSend& s : sends_) sent_to_[s.peer] = 0;
    for (const RecvOp& op : recvs) {
      check_peer(op.peer, "recv");
      if (op.data == nullptr && op.bytes != 0) throw CommError(who() + ": recv into null data");
      if (op.reduce != nullptr && op.bytes % dtype_bytes(op.reduce->dtype) != 0) {
        throw CommError(who() + ": reducing recv of " + std::to_string(op.bytes) +
                        " bytes from rank " + std::to_string(op.peer) + " is not a whole number of " +
                        std::string(dtype_name(op.reduce->dtype)) + " elements");
      }
      recvs_.push_back(PendingRecv{op.peer, static_cast<char*>(op.data), op.bytes, op.reduce});
    }
    pending_ = sends_.size() + recvs_.size();
  }

  // One round-robin pass; true if any chunk moved.
  bool pass() {
    bool progress = false;
    ++pass_id_;
    for (PendingSend& s : sends_) {
      if (s.done) continue;
      if (s.awaiting_release) {
        if (!out_[ring_of(s.peer)].try_release(s)) continue;
        progress = true;
        --pending_;
        continue;
      }
      if (last_pass_[s.peer] == pass_id_) continue;
      last_pass_[s.peer] = pass_id_;  // later sends to this peer wait for this one
      if (!out_[ring_of(s.peer)].try_push(s)) continue;
      progress = true;
      pending_ -= s.done;
      wake_if_sleeping(segment_.entry(s.peer));
    }
    ++pass_id_;
    for (PendingRecv& r : recvs_) {
      if (r.done || last_pass_[r.peer] == pass_id_) continue;
      last_pass_[r.peer] = pass_id_;
      const PopResult got = in_[ring_of(r.peer)].try_pop(r);
      if (got.status == PopStatus::Empty) continue;
      if (got.status == PopStatus::LengthMismatch) report_mismatch(r, got.sent_bytes);
      if (got.status == PopStatus::SenderGone) report_unreadable(r, got.read_error);
      progress = true;
      pending_ -= r.done;
      wake_if_sleeping(segment_.entry(r.peer));
    }
    return progress;
  }

  [[noreturn]] void report_mismatch(const PendingRecv& r, uint64_t sent_bytes) {
    const std::string peer = "rank " + std::to_string(r.peer);
    if (sent_bytes == r.bytes) {
      segment_.abort_job(rank_, who() + ": out-of-order chunk from " + peer + " (protocol error)");
    }
    segment_.abort_job(rank_, "length mismatch: " + peer + " sent " + std::to_string(sent_bytes) +
                                  " bytes but " + who() + " expected " + std::to_string(r.bytes) +
                                  " bytes from it");
  }

  // A single-copy read failed or its sender closed its transport meanwhile.
  [[noreturn]] void report_unreadable(const PendingRecv& r, int read_error) {
    RankEntry& e = segment_.entry(r.peer);
    const int pid = e.pid.load(std::memory_order_relaxed);
    const bool closed = e.closed.load(std::memory_order_acquire) != 0;
    if (closed || !process_alive(pid, e.start_time)) fail_peer_gone(r.peer, closed);
    segment_.abort_job(rank_, who() + " could not read the message of rank " + std::to_string(r.peer) + " (pid " +
                                  std::to_string(pid) + ") in its memory: " + std::strerror(read_error));
  }

  void progress_until_done() {
    RankEntry& me = segment_.entry(rank_);
    // The clock is read only once a quiet stretch outlasts untimed_passes_:
    // a read costs as much as a pause here, and most waits end sooner.
    int quiet_passes = 0;
    Clock::time_point quiet_since, next_liveness;
    while (pending_ > 0) {
      if (pass()) {
        quiet_passes = 0;
        continue;
      }
      segment_.check_abort();
      if (++quiet_passes <= untimed_passes_) {
        spin_pause();
        continue;
      }
      const Clock::time_point now = Clock::now();
      if (quiet_passes == untimed_passes_ + 1) {
        quiet_since = now;
        if (next_liveness == Clock::time_point{}) next_liveness = now + kLivenessPeriod;
      }
      const auto idle = now - quiet_since;
      if (idle < spin_window_) {
        spin_pause();
        continue;
      }
      if (now >= next_liveness) {
        check_peers_alive();
        next_liveness = now + kLivenessPeriod;
      }
      if (idle >= timeout_) throw_timeout();
      if (idle < kYieldWindow) {
        sched_yield();
        continue;
      }
      me.sleeping.store(1, std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      const uint32_t bell = me.doorbell.load(std::memory_order_relaxed);
      if (pass()) {
        quiet_passes = 0;
      } else {
        const auto left = std::chrono::duration_cast<std::chrono::microseconds>(timeout_ - idle);
        futex_wait(me.doorbell, bell, std::min<std::chrono::microseconds>(kSleepSlice, left) +
                                          std::chrono::microseconds(1));
      }
      me.sleeping.store(0, std::memory_order_relaxed);
    }
  }

  // "its data (recv of 4096 bytes, 0 received)" for the first pending op with `peer`.
  std::string pending_with(int peer) const {
    for (const PendingRecv& r : recvs_) {
      if (!r.done && r.peer == peer) {
        return "its data (recv of " + std::to_string(r.bytes) + " bytes, " +
               std::to_string(r.offset) + " received)";
      }
    }
    for (const PendingSend& s : sends_) {
      if (!s.done && s.peer == peer) {
        return "it to take data (send of " + std::to_string(s.bytes) + " bytes, " +
               std::to_string(s.offset) + " sent)";
      }
    }
    return {};
  }

  bool has_pending(int peer) const {
    for (const PendingRecv& r : recvs_) {
      if (!r.done && r.peer == peer) return true;
    }
    for (const PendingSend& s : sends_) {
      if (!s.done && s.peer == peer) return true;
    }
    return false;
  }

  // A peer we still need that has closed its transport or whose process is
  // gone (exited, killed, zombie) fails the exchange at once.
  void check_peers_alive() {
    for (int peer = 0; peer < world_; ++peer) {
      if (peer == rank_ || !has_pending(peer)) continue;
      RankEntry& e = segment_.entry(peer);
      const bool closed = e.closed.load(std::memory_order_acquire) != 0;
      const int pid = e.pid.load(std::memory_order_relaxed);
      if (!closed && process_alive(pid, e.start_time)) continue;
      // It may have published its last chunks before leaving: drain first.
      if (pass()) return;
      fail_peer_gone(peer, closed);
    }
  }

  // `peer` closed its transport or died while we still needed it.
  [[noreturn]] void fail_peer_gone(int peer, bool closed) {
    // A peer that closed after a failure has usually aborted the job with
    // the real cause (e.g. which rank died): report that cause.
    segment_.check_abort();
    const int pid = segment_.entry(peer).pid.load(std::memory_order_relaxed);
    const std::string what = "rank " + std::to_string(peer) + " (pid " + std::to_string(pid) + ") " +
                             (closed ? "closed its transport" : "died") + " while " + who() + " waited for " +
                             pending_with(peer);
    // A death is job-wide news: every rank then fails naming the dead one,
    // not the neighbour that noticed first.
    if (!closed) segment_.abort_job(rank_, what);
    throw CommError(what);
  }

  [[noreturn]] void throw_timeout() const {
    std::string peers;
    for (int peer = 0; peer < world_; ++peer) {
      const std::string waiting_for = peer == rank_ ? std::string() : pending_with(peer);
      if (waiting_for.empty()) continue;
      peers += (peers.empty() ? "rank " : "; rank ") + std::to_string(peer) + " and " + waiting_for;
    }
    throw CommError(who() + " timed out after " + format_seconds(timeout_) + " waiting for " +
                    peers);
  }

  Segment segment_;
  int rank_;
  int world_;
  std::chrono::milliseconds timeout_;
  std::chrono::microseconds spin_window_;
  int untimed_passes_;
  size_t single_copy_bytes_;
  std::vector<char> bounce_;       // single-copy reductions read through it
  std::vector<RingSender> out_;    // [ring_of(peer)]: ring rank_ -> peer
  std::vector<RingReceiver> in_;   // [ring_of(peer)]: ring peer -> rank_
  std::vector<PendingSend> sends_;  // reused across exchanges: no allocation per call
  std::vector<PendingRecv> recvs_;
  std::vector<uint32_t> last_pass_;  // [peer]: pass that already moved an op with it
  std::vector<size_t> sent_to_;      // [peer]: bytes of this exchange's sends to it (zero between exchanges)
  uint32_t pass_id_ = 0;
  size_t pending_ = 0;
  bool broken_ = false;
};

bool valid_job_id(std::string_view id) {
  if (id.empty() || id.size() > 200) return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::string shm_segment_name(std::string_view job_id) {
  return "/meshtrain-" + std::string(job_id);
}

std::unique_ptr<Transport> connect_shm(const ShmOptions& o) {
  if (!valid_job_id(o.job_id)) {
    throw ConfigError("shm job id '" + o.job_id + "' must be 1-200 characters of [A-Za-z0-9._-]");
  }
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size) {
    throw ConfigError("shm rank " + std::to_string(o.rank) + " is outside world size " +
                      std::to_string(o.world_size));
  }
  if (o.slot_bytes == 0 || o.slot_bytes % kPageBytes != 0 || o.slot_count < 1 ||
      o.slot_count > (1u << 20)) {
    throw ConfigError("shm ring geometry " + std::to_string(o.slot_count) + " x " +
                      std::to_string(o.slot_bytes) + " bytes: slot_bytes must be a multiple of 4096");
  }
  if (o.transport.timeout.count() <= 0) throw ConfigError("shm timeout must be positive");
  ShmOptions chosen = o;
  if (o.world_size > usable_cpus()) chosen.single_copy_bytes = o.single_copy_bytes_shared_cores;
  return std::make_unique<ShmTransport>(chosen);
}

}  // namespace meshtrain::comm
