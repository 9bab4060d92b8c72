#pragma once
// Steps whose update is skipped, so a long run survives a bad shard of data
// or a loss spike without a restart (docs/long-jobs.md):
//
//   training.skip_steps   named step ranges ("1200-1250, 3000", 1-based as
//                         the logs count steps): the step reads its batch and
//                         runs nothing else, so the data order stays as it was
//   training.spike_sigma  k > 0: a step whose loss or gradient norm exceeds
//                         mean + k sigma of the last training.spike_window
//                         steps (OLMo: 6 sigma over 128) is not applied
//
// Every rank sees the same global loss and norm, so every rank decides the
// same. The spike window is part of the training state: it is saved in each
// checkpoint, so a killed and resumed run skips exactly what the
// uninterrupted one does.
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace meshtrain {

struct StepRange {
  int64_t first = 0, last = 0;  // 1-based, inclusive
};

// Parses training.skip_steps; ConfigError naming the key for anything else
// than comma-separated "N" or "N-M" with 1 <= N <= M.
std::vector<StepRange> parse_step_ranges(const std::string& text);

// The rolling statistics of spike detection.
class SpikeWindow {
 public:
  // sigma = 0: never a spike.
  SpikeWindow(double sigma, int64_t window);

  bool enabled() const { return sigma_ > 0; }
  // Whether (loss, norm) lies above mean + sigma x standard deviation of
  // either series. Never before the window has filled.
  bool is_spike(double loss, double norm) const;
  // Every finite step's values enter the window, skipped ones included: a
  // lasting shift of the loss becomes the new normal after a window's worth
  // of steps instead of skipping every step from then on.
  void add(double loss, double norm);

  // The window as text for a checkpoint's metadata (exact: hexadecimal
  // floating point), and back. restore() throws CheckpointError on text it
  // did not write.
  std::string serialize() const;
  void restore(const std::string& text);

 private:
  double sigma_;
  size_t window_;
  std::deque<double> loss_, norm_;
};

// What the loop asks before and after a step.
class UpdateGuard {
 public:
  UpdateGuard(const std::string& skip_steps, double spike_sigma, int64_t spike_window);

  // Step `step` (1-based) is in training.skip_steps.
  bool skips_step(int64_t step) const;
  // After the step's loss and gradient norm are known: whether to leave the
  // update out. Adds them to the window.
  bool skip_update(double loss, double norm);

  SpikeWindow& window() { return window_; }
  const SpikeWindow& window() const { return window_; }

 private:
  std::vector<StepRange> ranges_;
  SpikeWindow window_;
};

}  // namespace meshtrain
