#pragma once
// A Communicator owns a process's Transport and the ONE communication thread
// that drives it. Every process group of the process submits its operations
// to the same FIFO queue, and they run one at a time in submission order.
//
// Ordering rule (as with NCCL): every rank must submit the collectives of
// the groups it shares with other ranks in the same order. Two ranks that
// queue all_reduce on the world group and then on a tp group must both do
// so in that order; otherwise they wait on each other's messages and fail at
// the transport's timeout.
//
// Failure: when an operation fails, the transport is closed at once (peers
// blocked on this rank get a CommError instead of waiting for their
// timeout) and the communicator is broken: every later operation fails with
// a CommError that quotes the first failure. Recovery is a new communicator
// (the supervisor restarts the job).
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "meshtrain/comm/collectives/collectives.hpp"
#include "meshtrain/comm/group/work.hpp"
#include "meshtrain/comm/transport/transport.hpp"
#include "meshtrain/core/function_ref.hpp"

namespace meshtrain::comm {

// A reference to code that builds an operation's description
// ("all_reduce(ring, sum, 1000 x f32) on group [0, 1]"). Only an error or
// queued work needs the text; a blocking call that succeeds never builds it.
// Building it every time (several small strings) cost ~0.3 us per call, a
// fifth of a 2-rank 4 KiB all-reduce on shared memory (bench/RESULTS.md).
using DescriptionRef = FunctionRef<std::string()>;
// An operation that runs before the call taking it returns (run_blocking):
// referenced, not copied into a std::function (no allocation per call).
using OperationRef = FunctionRef<void(Transport&)>;

class Communicator {
 public:
  explicit Communicator(std::unique_ptr<Transport> transport, CollectiveOptions options = {});
  // Runs what is queued, then stops the thread and closes the transport.
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& transport_name() const { return transport_name_; }
  const CollectiveOptions& options() const { return options_; }
  bool broken() const;

  // Queues `op`, run later on the communication thread with the transport.
  // A CommError (or any exception) it throws is given to the Work, prefixed
  // with `description`.
  WorkHandle submit(std::string description, std::function<void(Transport&)> op);
  // submit() and wait, for a caller that blocks anyway: when nothing is
  // queued or running, `op` runs right here on the calling thread, which
  // saves two thread hand-offs (most of a small collective's latency).
  // Throws the CommError the Work would have held.
  void run_blocking(DescriptionRef describe, OperationRef op);

 private:
  struct Pending {
    WorkHandle work;
    std::function<void(Transport&)> op;
  };
  void run();
  // Runs op unless the communicator is broken; on failure closes the
  // transport and marks the communicator broken. Returns the error, if any.
  std::exception_ptr execute(DescriptionRef what, const std::string& broken, OperationRef op);

  std::unique_ptr<Transport> transport_;  // used by whoever holds busy_; reset on the first failure
  const int rank_, size_;
  const std::string transport_name_;
  const CollectiveOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable queued_cv_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  bool busy_ = false;  // an operation holds the transport (the thread's, or run_blocking's)
  std::string broken_;  // the first failure, empty while healthy
  std::thread thread_;  // last: starts after everything above exists
};

}  // namespace meshtrain::comm
