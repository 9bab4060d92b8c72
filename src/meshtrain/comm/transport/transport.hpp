#pragma once
// What a transport is: a reliable, ordered byte mover between the ranks of
// one job. Collective algorithms (comm/collectives/) are written once over
// this interface and run unchanged on shared memory, TCP and MPI.
//
// The one primitive is exchange(): post several sends and receives at once
// and return when all are done. Ring, tree, halving-doubling, all-to-all and
// the Reduction Server are all sequences of exchanges, and posting both
// directions together is what keeps bounded buffers from deadlocking.
//
// Matching: messages between an ordered pair (src -> dst) are delivered in
// the order they were sent, one send to one receive. Every message carries
// its length; a receive of another length is a CommError naming both ranks
// (mismatched buffer sizes across ranks are detected, never truncated).
//
// Thread safety: one thread at a time calls exchange() on a transport (the
// process group's communication thread).
#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "meshtrain/comm/reduce.hpp"

namespace meshtrain::comm {

struct SendOp {
  int peer = -1;
  const void* data = nullptr;
  size_t bytes = 0;
};

// A receive; with `reduce` set, incoming bytes are combined into `data`
// (data[i] = op(data[i], incoming[i])) instead of overwriting it, so a
// transport can reduce straight out of its staging buffers without a copy.
struct RecvOp {
  int peer = -1;
  void* data = nullptr;
  size_t bytes = 0;
  const Reduction* reduce = nullptr;
};

struct TransportOptions {
  // Longest wait for any single exchange before a CommError that names the
  // peers still pending. A dead peer is reported as soon as it is noticed.
  std::chrono::milliseconds timeout{30000};
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "shm", "tcp", "mpi", ...
  virtual std::string_view name() const = 0;

  // Posts all sends and receives, progresses them together, and returns when
  // every one has completed. Throws CommError on timeout, a dead or
  // misbehaving peer, or a length mismatch. A peer equal to rank() is an error.
  virtual void exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs) = 0;

  void send(int peer, const void* data, size_t bytes) {
    SendOp op{peer, data, bytes};
    exchange({&op, 1}, {});
  }
  void recv(int peer, void* data, size_t bytes) {
    RecvOp op{peer, data, bytes, nullptr};
    exchange({}, {&op, 1});
  }
};

}  // namespace meshtrain::comm
