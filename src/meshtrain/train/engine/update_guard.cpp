#include "meshtrain/train/engine/update_guard.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "meshtrain/core/error.hpp"

namespace meshtrain {
namespace {

[[noreturn]] void bad_ranges(const std::string& text, const std::string& why) {
  throw ConfigError("training.skip_steps: '" + text + "': " + why +
                    " (expected comma-separated steps or ranges, e.g. \"1200-1250, 3000\")");
}

int64_t parse_step(const std::string& all, const std::string& word) {
  if (word.empty() || word.find_first_not_of("0123456789") != std::string::npos)
    bad_ranges(all, "'" + word + "' is not a step number");
  const int64_t v = std::strtoll(word.c_str(), nullptr, 10);
  if (v < 1) bad_ranges(all, "steps count from 1");
  return v;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Mean and population standard deviation.
void moments(const std::deque<double>& v, double& mean, double& sd) {
  double sum = 0;
  for (double x : v) sum += x;
  mean = sum / double(v.size());
  double sq = 0;
  for (double x : v) sq += (x - mean) * (x - mean);
  sd = std::sqrt(sq / double(v.size()));
}

}  // namespace

std::vector<StepRange> parse_step_ranges(const std::string& text) {
  std::vector<StepRange> ranges;
  if (trim(text).empty()) return ranges;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    item = trim(item);
    const size_t dash = item.find('-');
    StepRange r;
    r.first = parse_step(text, trim(item.substr(0, dash)));
    r.last = dash == std::string::npos ? r.first : parse_step(text, trim(item.substr(dash + 1)));
    if (r.last < r.first) bad_ranges(text, "range '" + item + "' ends before it starts");
    ranges.push_back(r);
  }
  return ranges;
}

SpikeWindow::SpikeWindow(double sigma, int64_t window) : sigma_(sigma), window_(static_cast<size_t>(window)) {}

bool SpikeWindow::is_spike(double loss, double norm) const {
  if (!enabled() || loss_.size() < window_) return false;
  double mean, sd;
  moments(loss_, mean, sd);
  if (loss > mean + sigma_ * sd) return true;
  moments(norm_, mean, sd);
  return norm > mean + sigma_ * sd;
}

void SpikeWindow::add(double loss, double norm) {
  if (!enabled() || !std::isfinite(loss) || !std::isfinite(norm)) return;
  loss_.push_back(loss);
  norm_.push_back(norm);
  if (loss_.size() > window_) {
    loss_.pop_front();
    norm_.pop_front();
  }
}

std::string SpikeWindow::serialize() const {
  std::string out;
  char buf[64];
  for (size_t i = 0; i < loss_.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s%a %a", i ? " " : "", loss_[i], norm_[i]);
    out += buf;
  }
  return out;
}

void SpikeWindow::restore(const std::string& text) {
  loss_.clear();
  norm_.clear();
  const char* p = text.c_str();
  for (;;) {
    while (*p == ' ') ++p;
    if (!*p) break;
    char* end = nullptr;
    const double loss = std::strtod(p, &end);
    if (end == p) throw CheckpointError("spike_window: malformed value at '" + std::string(p).substr(0, 20) + "'");
    p = end;
    const double norm = std::strtod(p, &end);
    if (end == p) throw CheckpointError("spike_window: a loss without its gradient norm");
    p = end;
    loss_.push_back(loss);
    norm_.push_back(norm);
  }
  while (loss_.size() > window_) {  // a run resumed with a shorter window
    loss_.pop_front();
    norm_.pop_front();
  }
}

UpdateGuard::UpdateGuard(const std::string& skip_steps, double spike_sigma, int64_t spike_window)
    : ranges_(parse_step_ranges(skip_steps)), window_(spike_sigma, spike_window) {}

bool UpdateGuard::skips_step(int64_t step) const {
  for (const StepRange& r : ranges_)
    if (step >= r.first && step <= r.last) return true;
  return false;
}

bool UpdateGuard::skip_update(double loss, double norm) {
  const bool spike = window_.is_spike(loss, norm);
  window_.add(loss, norm);
  return spike;
}

}  // namespace meshtrain
