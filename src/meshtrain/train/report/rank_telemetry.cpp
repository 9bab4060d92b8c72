#include "meshtrain/train/report/rank_telemetry.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace meshtrain {

std::vector<double> RankInterval::encode() const {
  return {step_ms, data_ms, busy_ms, comm_ms, checkpoint_ms, peak_tracked_mb, rss_mb, peak_rss_mb, steps};
}

RankInterval RankInterval::decode(const std::vector<double>& v) {
  double f[kFields] = {};
  std::copy_n(v.begin(), std::min(v.size(), kFields), f);
  return {.step_ms = f[0], .data_ms = f[1], .busy_ms = f[2], .comm_ms = f[3], .checkpoint_ms = f[4],
          .peak_tracked_mb = f[5], .rss_mb = f[6], .peak_rss_mb = f[7], .steps = f[8]};
}

void IntervalTimer::add_step(double step_s, double data_s, double comm_s, double checkpoint_s) {
  ++steps_;
  step_s_ += step_s;
  data_s_ += data_s;
  comm_s_ += comm_s;
  checkpoint_s_ += checkpoint_s;
}

RankInterval IntervalTimer::take(double peak_tracked_mb) {
  const double per = steps_ > 0 ? 1e3 / double(steps_) : 0;
  RankInterval r{.step_ms = step_s_ * per, .data_ms = data_s_ * per, .comm_ms = comm_s_ * per,
                 .checkpoint_ms = checkpoint_s_ * per, .peak_tracked_mb = peak_tracked_mb, .steps = double(steps_)};
  r.busy_ms = std::max(0.0, r.step_ms - r.data_ms - r.comm_ms - r.checkpoint_ms);
  resident_memory_mb(r.rss_mb, r.peak_rss_mb);
  *this = IntervalTimer{};
  return r;
}

void resident_memory_mb(double& rss_mb, double& peak_rss_mb) {
  rss_mb = peak_rss_mb = 0;
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return;
  char line[256];
  while (std::fgets(line, sizeof line, f)) {
    long kb = 0;
    if (std::sscanf(line, "VmRSS: %ld kB", &kb) == 1) rss_mb = double(kb) / 1024;
    if (std::sscanf(line, "VmHWM: %ld kB", &kb) == 1) peak_rss_mb = double(kb) / 1024;
  }
  std::fclose(f);
}

StragglerReport StragglerWatch::assess(const std::vector<RankInterval>& ranks) {
  StragglerReport out;
  if (ranks.empty()) return out;
  best_busy_ms_.resize(ranks.size(), 0);
  slow_windows_.resize(ranks.size(), 0);
  window_busy_ms_.resize(ranks.size(), 0);
  double fastest = ranks[0].busy_ms;
  for (const RankInterval& r : ranks) fastest = std::min(fastest, r.busy_ms);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const double busy = ranks[i].busy_ms;
    if (best_busy_ms_[i] <= 0 || (busy > 0 && busy < best_busy_ms_[i])) best_busy_ms_[i] = busy;
    out.vs_fastest.push_back(fastest > 0 ? busy / fastest : 1);
    out.vs_best.push_back(best_busy_ms_[i] > 0 ? busy / best_busy_ms_[i] : 1);
  }
  if (++intervals_ > 2) add_to_window(ranks, out);
  for (size_t i = 0; i < ranks.size(); ++i)
    if (slow_windows_[i] >= 2) out.stragglers.push_back(static_cast<int>(i));
  out.window_busy_ms = last_window_busy_ms_;
  out.window_vs_fastest = last_window_vs_fastest_;
  return out;
}

void StragglerWatch::add_to_window(const std::vector<RankInterval>& ranks, StragglerReport& out) {
  double wall_ms = 0;
  const double steps = std::max(1.0, ranks[0].steps);
  for (size_t i = 0; i < ranks.size(); ++i) {
    window_busy_ms_[i] += ranks[i].busy_ms * steps;
    wall_ms = std::max(wall_ms, ranks[i].step_ms * steps);
  }
  window_ms_ += wall_ms;
  window_steps_ += steps;
  if (window_ms_ < min_window_ms_) return;
  const double fastest = *std::min_element(window_busy_ms_.begin(), window_busy_ms_.end()) / window_steps_;
  last_window_busy_ms_.assign(ranks.size(), 0);
  last_window_vs_fastest_.assign(ranks.size(), 1);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const double busy = window_busy_ms_[i] / window_steps_;
    last_window_busy_ms_[i] = busy;
    if (fastest > 0) last_window_vs_fastest_[i] = busy / fastest;
    const bool slow = last_window_vs_fastest_[i] > threshold_ && busy - fastest >= min_gap_ms_;
    slow_windows_[i] = slow ? slow_windows_[i] + 1 : 0;
    if (slow_windows_[i] == 2) out.new_stragglers.push_back(static_cast<int>(i));
  }
  std::fill(window_busy_ms_.begin(), window_busy_ms_.end(), 0.0);
  window_ms_ = window_steps_ = 0;
}

void add_rank_fields(nlohmann::json& record, const std::vector<RankInterval>& ranks, const StragglerReport& report) {
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankInterval& r = ranks[i];
    list.push_back({{"worker", i}, {"step_ms", r.step_ms}, {"data_ms", r.data_ms}, {"busy_ms", r.busy_ms},
                    {"comm_exposed_ms", r.comm_ms}, {"checkpoint_ms", r.checkpoint_ms},
                    {"peak_tracked_mb", r.peak_tracked_mb}, {"rss_mb", r.rss_mb}, {"peak_rss_mb", r.peak_rss_mb},
                    {"slow_vs_fastest", report.vs_fastest[i]}, {"slow_vs_best", report.vs_best[i]}});
  }
  record["ranks"] = list;
  record["stragglers"] = report.stragglers;
}

}  // namespace meshtrain
