#include "meshtrain/comm/device/device_watchdog.hpp"

#include <atomic>
#include <sstream>
#include <utility>

namespace meshtrain::comm {
namespace {

std::string seconds(double s) {
  std::ostringstream out;
  out << s;  // 300, 0.2
  return out.str();
}

}  // namespace

DeviceWatchdog::DeviceWatchdog(double timeout_s, OnFailure on_failure, std::function<void()> on_thread_start,
                               std::chrono::microseconds interval)
    : timeout_s_(timeout_s), interval_(interval), on_failure_(std::move(on_failure)) {
  thread_ = std::thread([this, start = std::move(on_thread_start)]() mutable { run(std::move(start)); });
}

DeviceWatchdog::~DeviceWatchdog() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void DeviceWatchdog::watch(WatchedWork work) {
  {
    std::lock_guard lock(mutex_);
    if (failed_) {  // nothing is polled any more
      if (work.finished) work.finished(false);
      return;
    }
    queue_.push_back(std::move(work));
  }
  wake_.notify_all();
}

size_t DeviceWatchdog::pending() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

bool DeviceWatchdog::failed() const {
  std::lock_guard lock(mutex_);
  return failed_;
}

void DeviceWatchdog::run(std::function<void()> on_thread_start) {
  if (on_thread_start) on_thread_start();
  using Clock = std::chrono::steady_clock;
  // The oldest item's clock starts when it becomes the oldest: its turn on
  // the stream comes after the work before it.
  Clock::time_point oldest_since;
  bool timing = false;
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) break;
    if (!timing) {
      oldest_since = Clock::now();
      timing = true;
    }
    // The oldest item, polled without the lock (a CUDA query may take a
    // while): only this thread removes items, and watch()'s push_back
    // keeps references to the others valid, so no copy per poll.
    const WatchedWork& oldest = queue_.front();
    lock.unlock();
    const WatchedProgress progress = oldest.poll();
    const std::string& what = oldest.what;
    const double waited = std::chrono::duration<double>(Clock::now() - oldest_since).count();
    if (!progress.error.empty() || (!progress.done && waited > timeout_s_)) {
      fail(!progress.error.empty() ? what + " failed: " + progress.error
                                   : what + " did not finish within " + seconds(timeout_s_) +
                                         " s (parallel.timeout_s): a peer is dead, hung or never called it");
      return;
    }
    lock.lock();
    if (progress.done) {
      WatchedWork done = std::move(queue_.front());
      queue_.pop_front();
      timing = false;
      lock.unlock();
      if (done.finished) done.finished(true);
      lock.lock();
      continue;
    }
    wake_.wait_for(lock, interval_, [&] { return stop_; });
    if (stop_) break;
  }
  // Stopping: what is left is either done and not yet polled (a clean
  // shutdown, within one interval of the last operation) or still running.
  // One last poll, here on the thread the device was made current on, tells
  // which, so the flight recorder marks only the latter failed.
  std::deque<WatchedWork> left;
  left.swap(queue_);
  lock.unlock();
  for (WatchedWork& w : left)
    if (w.finished) w.finished(w.poll && w.poll().done);
}

void DeviceWatchdog::fail(const std::string& why) {
  std::deque<WatchedWork> dropped;
  {
    std::lock_guard lock(mutex_);
    failed_ = true;
    dropped.swap(queue_);
  }
  for (WatchedWork& w : dropped)
    if (w.finished) w.finished(false);
  if (on_failure_) on_failure_(why);
}

void run_watched(const std::string& what, double timeout_s, const DeviceWatchdog::OnFailure& on_timeout,
                 const std::function<void()>& call, std::chrono::microseconds interval) {
  std::atomic<bool> returned{false};
  DeviceWatchdog watchdog(timeout_s, on_timeout, {}, interval);
  watchdog.watch({.what = what,
                  .poll = [&returned] { return WatchedProgress{.done = returned.load(), .error = {}}; },
                  .finished = {}});
  call();  // an exception leaves too: the watchdog stops with it
  returned = true;
}

}  // namespace meshtrain::comm
