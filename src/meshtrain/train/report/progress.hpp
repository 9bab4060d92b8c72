#pragma once
// What a person watching a run sees: on a terminal, one status line redrawn
// in place (a bar, step, loss, throughput, lr, ETA); otherwise, plain log
// lines every `log_every` steps, so logs of batch jobs stay readable.
#include <cstdint>
#include <cstdio>
#include <string>

namespace meshtrain {

struct ProgressSample {
  int64_t step = 0;  // steps done, 1-based after the first step
  int64_t total_steps = 0;
  double loss = 0;
  double lr = 0;
  double throughput = 0;  // tokens or samples per second
  const char* unit = "tok/s";
  double seconds_left = 0;
};

class Progress {
 public:
  // interactive: redraw one line (pass isatty of the stream).
  Progress(std::FILE* out, bool interactive);
  // Shows a step. Called every step; plain mode prints only when asked to log.
  void update(const ProgressSample& sample, bool log_line);
  // Work counted in other units than steps (bytes tokenized, merges made):
  // on a terminal, "[####----]  45% detail" redrawn in place, at most ten
  // times a second and always at done = 1; otherwise nothing.
  void fraction(double done, const std::string& detail);
  // A line of its own (an eval result, a checkpoint), above the status line.
  void message(const std::string& text);
  // Ends the status line.
  void finish();

 private:
  void clear_line();
  static std::string bar(double done);
  std::FILE* out_;
  bool interactive_;
  bool line_open_ = false;
  double last_drawn_s_ = -1;  // fraction(): when it last drew
};

// "1h02m", "3m05s", "12s".
std::string format_duration(double seconds);

}  // namespace meshtrain
