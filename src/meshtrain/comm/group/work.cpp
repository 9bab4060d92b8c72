#include "meshtrain/comm/group/work.hpp"

namespace meshtrain::comm {

void Work::wait() {
  std::unique_lock lock(mutex_);
  done_cv_.wait(lock, [&] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

bool Work::is_completed() const {
  std::lock_guard lock(mutex_);
  return done_;
}

double Work::busy_seconds() const {
  std::lock_guard lock(mutex_);
  return done_ ? std::chrono::duration<double>(finished_ - started_).count() : 0.0;
}

void Work::start() {
  std::lock_guard lock(mutex_);
  started_ = std::chrono::steady_clock::now();
}

void Work::finish(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    finished_ = std::chrono::steady_clock::now();
    if (started_ == std::chrono::steady_clock::time_point{}) started_ = finished_;
    error_ = std::move(error);
    done_ = true;
  }
  done_cv_.notify_all();
}

}  // namespace meshtrain::comm
