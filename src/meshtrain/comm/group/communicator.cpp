#include "meshtrain/comm/group/communicator.hpp"

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {

Communicator::Communicator(std::unique_ptr<Transport> transport, CollectiveOptions options)
    : transport_(std::move(transport)),
      rank_(transport_ ? transport_->rank() : -1),
      size_(transport_ ? transport_->size() : 0),
      transport_name_(transport_ ? std::string(transport_->name()) : std::string()),
      options_(std::move(options)) {
  if (!transport_) throw CommError("Communicator: no transport given");
  thread_ = std::thread([this] { run(); });
}

Communicator::~Communicator() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queued_cv_.notify_all();
  thread_.join();
}

bool Communicator::broken() const {
  std::lock_guard lock(mutex_);
  return !broken_.empty();
}

WorkHandle Communicator::submit(std::string description, std::function<void(Transport&)> op) {
  auto work = std::make_shared<Work>(std::move(description));
  {
    std::lock_guard lock(mutex_);
    if (stopping_) throw CommError(work->description() + ": the communicator is shutting down");
    queue_.push_back({work, std::move(op)});
  }
  queued_cv_.notify_one();
  return work;
}

void Communicator::run() {
  for (;;) {
    Pending next;
    std::string broken;
    {
      std::unique_lock lock(mutex_);
      queued_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) break;  // stopping, and everything queued has run
      next = std::move(queue_.front());
      queue_.pop_front();
      broken = broken_;
    }
    const std::string& what = next.work->description();
    if (!broken.empty()) {
      next.work->finish(std::make_exception_ptr(
          CommError(what + ": communicator of rank " + std::to_string(rank_) + " is broken by an earlier failure: " + broken)));
      continue;
    }
    std::string error;
    next.work->start();
    try {
      next.op(*transport_);
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "unknown exception";
    }
    if (error.empty()) {
      next.work->finish(nullptr);
      continue;
    }
    transport_.reset();  // close now, so peers blocked on us learn of it
    {
      std::lock_guard lock(mutex_);
      broken_ = what + ": " + error;
    }
    next.work->finish(std::make_exception_ptr(CommError(what + " failed on rank " + std::to_string(rank_) + ": " + error)));
  }
}

}  // namespace meshtrain::comm
