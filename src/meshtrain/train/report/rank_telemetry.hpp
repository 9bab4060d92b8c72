#pragma once
// Per-rank telemetry and straggler detection (docs/long-jobs.md).
//
// In a synchronous job every rank's step takes the same wall time: the
// ranks wait for each other. A slow rank shows in how the time splits: it
// computes longer and waits less, its peers wait longer in the
// communication. So each rank times its steps' parts (reading data, busy
// computing, exposed communication, checkpointing) over a log interval; the
// lead gathers them every interval. Intervals (after the first two, the
// warm-up) are judged in windows of at least `min_window_ms` of wall time:
// a rank whose busy time per step exceeds the fastest rank's by `threshold`
// times, and by at least `min_gap_ms`, in two windows in a row is a
// straggler: a warning and a metrics record, never a stop. (A short window
// is the OS scheduler's noise on a shared machine: a clean run of 1 ms steps
// on a loaded CI machine showed 2.8x for two 10-step intervals in a row.)
//
// The busy time is exact under data parallelism, whose gradient
// all-reduce's exposed wait is measured apart; under tensor and pipeline
// parallelism the waits inside forward and backward count as busy, so a
// straggler there shows less.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace meshtrain {

// One rank's averages per step over one log interval (milliseconds, MiB).
struct RankInterval {
  double step_ms = 0, data_ms = 0, busy_ms = 0, comm_ms = 0, checkpoint_ms = 0;
  double peak_tracked_mb = 0, rss_mb = 0, peak_rss_mb = 0;
  double steps = 0;  // how many steps the averages are over
  static constexpr size_t kFields = 9;
  std::vector<double> encode() const;
  static RankInterval decode(const std::vector<double>& v);  // CommError-free: pads what is missing with 0
};

// What this rank accumulates between two log lines.
class IntervalTimer {
 public:
  // One step: its wall time and its parts (busy = step - data - exposed
  // communication - checkpoint).
  void add_step(double step_s, double data_s, double comm_s, double checkpoint_s);
  // The averages since the last take(), with this process's memory now; resets.
  RankInterval take(double peak_tracked_mb);

 private:
  int64_t steps_ = 0;
  double step_s_ = 0, data_s_ = 0, comm_s_ = 0, checkpoint_s_ = 0;
};

// Resident set size of this process and its peak, in MiB (/proc/self/status).
void resident_memory_mb(double& rss_mb, double& peak_rss_mb);

struct StragglerReport {
  std::vector<double> vs_fastest;  // per rank: busy time / the fastest rank's
  std::vector<double> vs_best;     // per rank: busy time / its own best interval's
  std::vector<int> stragglers;     // ranks slow in the last judged window and the one before
  std::vector<int> new_stragglers; // of those, the ones that became so with this interval
  // The last judged window's busy time per step and its ratio to the fastest
  // rank's, per rank (empty until a window is judged).
  std::vector<double> window_busy_ms, window_vs_fastest;
};

// The lead's view across intervals.
class StragglerWatch {
 public:
  explicit StragglerWatch(double threshold = 1.5, double min_gap_ms = 1.0, double min_window_ms = 500)
      : threshold_(threshold), min_gap_ms_(min_gap_ms), min_window_ms_(min_window_ms) {}
  StragglerReport assess(const std::vector<RankInterval>& ranks);

 private:
  // Adds a judged interval to the window; judges the window once it spans
  // min_window_ms_, updating slow_windows_.
  void add_to_window(const std::vector<RankInterval>& ranks, StragglerReport& out);

  double threshold_, min_gap_ms_, min_window_ms_;
  std::vector<double> best_busy_ms_;
  std::vector<int> slow_windows_;         // per rank: consecutive slow windows up to now
  std::vector<double> window_busy_ms_;    // per rank: busy milliseconds in the open window
  double window_ms_ = 0, window_steps_ = 0;  // the open window's wall time and steps
  std::vector<double> last_window_busy_ms_, last_window_vs_fastest_;
  int intervals_ = 0;                     // assessed so far: the first two (warm-up) are not judged
};

// One interval's "ranks": [...] and "stragglers": [...], added to the step
// record of the interval's last step.
void add_rank_fields(nlohmann::json& record, const std::vector<RankInterval>& ranks, const StragglerReport& report);

}  // namespace meshtrain
