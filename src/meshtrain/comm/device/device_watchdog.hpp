#pragma once
// Watches device work that the host did not wait for, so that a stream-
// ordered wait (the compute stream waits on the communication stream's
// event; the host goes on queueing) still ends in an error, not a hang,
// when a peer dies or a transfer fails: PyTorch's NCCL watchdog, in small.
//
// A thread polls the oldest watched item (one stream's work finishes in the
// order it was issued) every `interval`. An item that finishes is retired
// (its `finished(true)`); one whose poll reports an error, or that has not
// finished `timeout_s` after it became the oldest, calls `on_failure` once
// with why, after every pending item's `finished(false)`. Nothing is polled
// after a failure.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace meshtrain::comm {

struct WatchedProgress {
  bool done = false;
  std::string error;  // not empty: the work failed (why)
};

struct WatchedWork {
  std::string what;                         // "NCCL communicator 'data': all_reduce #12 (4096 bytes)"
  std::function<WatchedProgress()> poll;    // on the watchdog's thread
  std::function<void(bool ok)> finished;    // once, on the watchdog's thread (may be empty)
};

class DeviceWatchdog {
 public:
  using OnFailure = std::function<void(const std::string& why)>;
  // `on_thread_start` runs first on the watchdog's thread (the CUDA device
  // made current there); may be empty.
  DeviceWatchdog(double timeout_s, OnFailure on_failure, std::function<void()> on_thread_start = {},
                 std::chrono::microseconds interval = std::chrono::microseconds(200));
  // Stops polling; each pending item is polled once more on the thread and
  // retired as done (finished(true)) if it is, else dropped (finished(false)).
  ~DeviceWatchdog();
  DeviceWatchdog(const DeviceWatchdog&) = delete;
  DeviceWatchdog& operator=(const DeviceWatchdog&) = delete;

  void watch(WatchedWork work);
  // Items not yet retired.
  size_t pending() const;
  // Whether on_failure has been called.
  bool failed() const;

 private:
  void run(std::function<void()> on_thread_start);
  // Every pending item's finished(false), then on_failure(why); under no lock.
  void fail(const std::string& why);

  const double timeout_s_;
  const std::chrono::microseconds interval_;
  OnFailure on_failure_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<WatchedWork> queue_;
  bool stop_ = false, failed_ = false;
  std::thread thread_;
};

// Runs `call` on this thread under a watchdog of its own: when it has not
// returned `timeout_s` after it began, on_timeout(why) runs on the
// watchdog's thread, with `what` named in why. The call itself goes on (it
// cannot be interrupted): for calls with no timeout of their own, such as
// NCCL's blocking joins, on_timeout ends the process.
void run_watched(const std::string& what, double timeout_s, const DeviceWatchdog::OnFailure& on_timeout,
                 const std::function<void()>& call,
                 std::chrono::microseconds interval = std::chrono::microseconds(10000));

}  // namespace meshtrain::comm
