#pragma once
// The handle of a collective that may still be running on the communication
// thread. The buffers passed to the collective must stay alive and untouched
// until wait() returns (or is_completed() is true); dropping the handle does
// not cancel the operation.
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

namespace meshtrain::comm {

class Work {
 public:
  explicit Work(std::string description) : description_(std::move(description)) {}

  // Blocks until the operation has finished; rethrows its CommError if it
  // failed. Never hangs: every transport wait has a timeout.
  void wait();
  // True once the operation has finished, successfully or not.
  bool is_completed() const;
  // e.g. "all_reduce(ring, sum, 1000 x f32) on group [0, 2]"
  const std::string& description() const { return description_; }

  // Seconds the communication thread spent on it (from start to finish);
  // 0 until it completes. Data parallelism compares this with the time it
  // waited, to report how much communication backward hid.
  double busy_seconds() const;

  // Called by the communication thread when the operation starts running.
  void start();
  // Called once by the communication thread; error is null on success.
  void finish(std::exception_ptr error);

 private:
  const std::string description_;
  mutable std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
  std::chrono::steady_clock::time_point started_, finished_;
};

using WorkHandle = std::shared_ptr<Work>;

}  // namespace meshtrain::comm
