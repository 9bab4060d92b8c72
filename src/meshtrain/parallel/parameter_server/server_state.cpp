#include "meshtrain/parallel/parameter_server/server_state.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "meshtrain/core/error.hpp"
#include "meshtrain/optim/factory.hpp"

namespace meshtrain::parallel::ps {

void StalenessStats::add(int64_t staleness) {
  ++pushes;
  sum += staleness;
  max = std::max(max, staleness);
  ++histogram[std::min<size_t>(static_cast<size_t>(std::max<int64_t>(staleness, 0)), kBuckets - 1)];
}

ServerState::ServerState(const ParamStore& initial, const ShardRange& shard, ServerStateOptions options)
    : options_(std::move(options)),
      shard_(shard),
      store_(make_shard_store(initial, shard)),
      optimizer_(make_optimizer(options_.optimizer, *store_)),
      workers_(static_cast<size_t>(options_.num_workers)) {
  validate_schedule(options_.schedule);
  if (options_.restore) step_ = options_.restore(*store_, *optimizer_);
  // Workers' clocks are not checkpointed: after a restore each worker is
  // taken to have done an equal share of the steps (exact for one worker,
  // whose data position then continues where it was).
  if (step_ > 0)
    for (auto& w : workers_) w.clock = step_ / std::max(1, options_.num_workers);
}

ServerState::Welcome ServerState::join(int rank) {
  std::lock_guard lock(mu_);
  WorkerRecord& w = workers_.at(static_cast<size_t>(rank));
  const int64_t slowest = min_live_clock();
  if (w.connections == 0 && slowest != std::numeric_limits<int64_t>::max()) w.clock = std::max(w.clock, slowest);
  ++w.connections;
  ++w.joins;
  last_activity_ = SteadyClock::now();
  cv_.notify_all();
  return Welcome{.step = step_, .clock = w.clock, .rejoined = w.joins > 1};
}

void ServerState::leave(int rank) {
  std::lock_guard lock(mu_);
  --workers_.at(static_cast<size_t>(rank)).connections;
  // The slowest live worker may have been this one: waiters re-check.
  cv_.notify_all();
}

int64_t ServerState::min_live_clock() const {
  int64_t m = std::numeric_limits<int64_t>::max();
  for (const auto& w : workers_)
    if (w.connections > 0) m = std::min(m, w.clock);
  return m;
}

ServerState::Turn ServerState::wait_turn(int rank, SteadyClock::time_point deadline) {
  std::unique_lock lock(mu_);
  if (options_.index != 0 || options_.max_staleness < 0) return done_ ? Turn::Done : Turn::Go;
  const int64_t mine = workers_.at(static_cast<size_t>(rank)).clock;
  const bool ok = cv_.wait_until(lock, deadline, [&] {
    // A worker is live while it asks, so the minimum is never above `mine`.
    return done_ || closed_ || mine - min_live_clock() <= options_.max_staleness;
  });
  if (closed_) return Turn::Closed;
  if (done_) return Turn::Done;
  return ok ? Turn::Go : Turn::Timeout;
}

std::string ServerState::slowest_description() {
  std::lock_guard lock(mu_);
  const int64_t m = min_live_clock();
  for (size_t r = 0; r < workers_.size(); ++r)
    if (workers_[r].connections > 0 && workers_[r].clock == m)
      return "rank " + std::to_string(r) + " at clock " + std::to_string(m);
  return "no live worker";
}

bool ServerState::read_params(std::string& payload, int64_t& version) {
  std::lock_guard lock(mu_);
  if (done_) return false;
  payload.assign(reinterpret_cast<const char*>(store_->params().data()), shard_.size() * sizeof(float));
  version = step_;
  return true;
}

bool ServerState::apply_push(int rank, int64_t version, const float* grad, int64_t& step, int64_t& staleness) {
  std::lock_guard lock(mu_);
  last_activity_ = SteadyClock::now();
  if (done_) return false;
  // The lr of the step this push becomes, as the synchronous trainer would use it.
  const double lr = scheduled_lr(options_.schedule, options_.base_lr, step_);
  if (shard_.size() > 0) std::memcpy(store_->grads().data(), grad, shard_.size() * sizeof(float));
  optimizer_->step(*store_, static_cast<float>(lr));
  staleness = step_ - version;
  staleness_.add(staleness);
  window_.add(staleness);
  ++step_;
  ++workers_.at(static_cast<size_t>(rank)).clock;
  ++workers_.at(static_cast<size_t>(rank)).pushes;
  last_lr_ = lr;
  if (options_.index == 0 && step_ >= options_.total_steps) done_ = true;
  if (options_.report_every > 0 && step_ % options_.report_every == 0) report_locked();
  if (options_.checkpoint_every > 0 && step_ % options_.checkpoint_every == 0 && !done_ && options_.on_checkpoint)
    options_.on_checkpoint(step_, *store_, *optimizer_);
  step = step_;
  cv_.notify_all();
  return true;
}

void ServerState::report_locked() {
  if (!options_.on_report) return;
  ServerReport r{.step = step_, .lr = last_lr_, .live_workers = 0, .window = window_};
  for (const auto& w : workers_) r.live_workers += w.connections > 0 ? 1 : 0;
  options_.on_report(r);
  window_ = StalenessStats{};
}

std::string ServerState::finish(int64_t& step) {
  std::lock_guard lock(mu_);
  done_ = true;
  cv_.notify_all();
  step = step_;
  const size_t bytes = shard_.size() * sizeof(float);
  auto buffers = optimizer_->state_buffers();
  std::string out;
  out.reserve(bytes * (1 + buffers.size()));
  out.append(reinterpret_cast<const char*>(store_->params().data()), bytes);
  for (auto& [name, buf] : buffers) out.append(reinterpret_cast<const char*>(buf->raw()), bytes);
  return out;
}

std::vector<std::string> ServerState::state_buffer_names() const {
  std::vector<std::string> names;
  for (auto& [name, buf] : optimizer_->state_buffers()) names.push_back(name);
  return names;
}

void ServerState::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  cv_.notify_all();
}

bool ServerState::done() {
  std::lock_guard lock(mu_);
  return done_;
}

bool ServerState::wait_done(SteadyClock::time_point deadline) {
  std::unique_lock lock(mu_);
  return cv_.wait_until(lock, deadline, [&] { return done_; });
}

void ServerState::wait_drained(SteadyClock::time_point deadline) {
  std::unique_lock lock(mu_);
  cv_.wait_until(lock, deadline, [&] {
    return std::all_of(workers_.begin(), workers_.end(), [](const WorkerRecord& w) { return w.connections == 0; });
  });
}

void ServerState::touch() {
  std::lock_guard lock(mu_);
  last_activity_ = SteadyClock::now();
}

SteadyClock::time_point ServerState::last_activity() {
  std::lock_guard lock(mu_);
  return last_activity_;
}

StalenessStats ServerState::staleness() {
  std::lock_guard lock(mu_);
  return staleness_;
}

std::vector<WorkerRecord> ServerState::workers() {
  std::lock_guard lock(mu_);
  return workers_;
}

int64_t ServerState::step() {
  std::lock_guard lock(mu_);
  return step_;
}

}  // namespace meshtrain::parallel::ps
