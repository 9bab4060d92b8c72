#pragma once
// What one parameter server knows, without any sockets: its shard of the
// parameters and optimizer state, its step, the clock and liveness of every
// worker rank, and the staleness it has seen. Connection threads call in
// concurrently; one mutex serializes everything, so pushes are applied one at
// a time, in arrival order.
//
// Terms (protocol.hpp): server step, version, staleness, clock. Bounded
// staleness (SSP, Ho et al. 2013) with bound s: a worker whose clock is c may
// pull only while c <= min{clock of each live worker} + s. Only server 0
// enforces it (its clocks are the ones workers are told; its step is the
// global step). A rank is live while it has a connection open; ranks that
// never connected or left do not hold the others back. A rank that rejoins
// resumes at max(its clock, the slowest live worker's clock), so a
// replacement does not stall the others while it catches up.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "meshtrain/core/param_store.hpp"
#include "meshtrain/optim/config.hpp"
#include "meshtrain/optim/optimizer.hpp"
#include "meshtrain/optim/schedule.hpp"
#include "meshtrain/parallel/parameter_server/shard_plan.hpp"

namespace meshtrain::parallel::ps {

using SteadyClock = std::chrono::steady_clock;

struct StalenessStats {
  static constexpr size_t kBuckets = 33;  // histogram[k]: pushes with staleness k; the last bucket: >= 32
  int64_t pushes = 0;
  int64_t sum = 0;
  int64_t max = 0;
  std::vector<int64_t> histogram = std::vector<int64_t>(kBuckets, 0);
  double mean() const { return pushes ? double(sum) / double(pushes) : 0.0; }
  void add(int64_t staleness);
};

struct WorkerRecord {
  int64_t clock = 0;     // the rank's step count (see above)
  int64_t pushes = 0;    // pushes of this rank applied here
  int connections = 0;   // open connections: live when > 0
  int64_t joins = 0;     // Hellos so far; > 1 means the rank rejoined
};

// Passed to the report callback every report_every pushes, and at the end.
struct ServerReport {
  int64_t step = 0;
  double lr = 0;  // of the last push applied
  int live_workers = 0;
  StalenessStats window;  // pushes since the previous report
};

struct ServerStateOptions {
  int index = 0;  // j: this server holds shard j
  int num_workers = 1;
  int64_t total_steps = 0;     // server 0 ends the job when its step reaches this
  int64_t max_staleness = -1;  // s; -1: unbounded
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  double base_lr = 1e-3;
  int64_t report_every = 0;  // 0: no periodic reports
  std::function<void(const ServerReport&)> on_report;  // called under the lock
  // The server's own checkpoints: every checkpoint_every steps (0: never),
  // on_checkpoint gets the step, the shard's store (its parameters) and the
  // optimizer, under the lock (pushes wait while it writes).
  int64_t checkpoint_every = 0;
  std::function<void(int64_t step, const ParamStore& shard, Optimizer& optimizer)> on_checkpoint;
  // Called once by the constructor: fills the shard's parameters and
  // optimizer state from a checkpoint and returns its step, or returns 0
  // (a fresh start). Unset: a fresh start.
  std::function<int64_t(ParamStore& shard, Optimizer& optimizer)> restore;
};

class ServerState {
 public:
  // Builds the shard store (parameters copied from `initial`) and its optimizer.
  ServerState(const ParamStore& initial, const ShardRange& shard, ServerStateOptions options);

  const ShardRange& shard() const { return shard_; }

  struct Welcome {
    int64_t step = 0;
    int64_t clock = 0;
    bool rejoined = false;
  };
  Welcome join(int rank);
  void leave(int rank);

  enum class Turn { Go, Done, Timeout, Closed };
  // Server 0 with s >= 0: waits until `rank` may pull (see above), the job is
  // done, the server closes, or the deadline. Go at once elsewhere.
  Turn wait_turn(int rank, SteadyClock::time_point deadline);
  // "rank 3 at clock 12" (the slowest live worker), for the timeout message.
  std::string slowest_description();

  // The shard's parameters as payload bytes; false when the job is done.
  bool read_params(std::string& payload, int64_t& version);
  // One optimizer step on the shard with `grad` (shard-sized) at this server's
  // step. Returns false (applying nothing) when the job is done; else sets the
  // new step and the push's staleness. Server 0 marks the job done when its
  // step reaches total_steps.
  bool apply_push(int rank, int64_t version, const float* grad, int64_t& step, int64_t& staleness);

  // Ends the job on this server and returns the final shard: parameters, then
  // each optimizer state buffer in state_buffer_names() order.
  std::string finish(int64_t& step);
  std::vector<std::string> state_buffer_names() const;

  // The server is going away (failing or stopped): waiters return Closed.
  void close();
  bool done();
  // Waits until done or the deadline; true when done.
  bool wait_done(SteadyClock::time_point deadline);
  // Waits until no worker connection is open, or the deadline.
  void wait_drained(SteadyClock::time_point deadline);
  // When a worker last sent anything: the server gives up after a long silence.
  void touch();
  SteadyClock::time_point last_activity();

  StalenessStats staleness();
  std::vector<WorkerRecord> workers();
  int64_t step();

 private:
  int64_t min_live_clock() const;  // under mu_; INT64_MAX when none is live
  void report_locked();

  ServerStateOptions options_;
  ShardRange shard_;
  std::unique_ptr<ParamStore> store_;
  std::unique_ptr<Optimizer> optimizer_;
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t step_ = 0;
  bool done_ = false;
  bool closed_ = false;
  double last_lr_ = 0;
  std::vector<WorkerRecord> workers_;
  StalenessStats staleness_, window_;
  SteadyClock::time_point last_activity_ = SteadyClock::now();
};

}  // namespace meshtrain::parallel::ps
