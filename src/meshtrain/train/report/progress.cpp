#include "meshtrain/train/report/progress.hpp"

#include <chrono>
#include <cmath>

namespace meshtrain {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%llds", (long long)s);
  return buf;
}

Progress::Progress(std::FILE* out, bool interactive) : out_(out), interactive_(interactive) {}

void Progress::clear_line() {
  if (line_open_) std::fputs("\r\033[2K", out_);
  line_open_ = false;
}

std::string Progress::bar(double done) {
  constexpr int kBarWidth = 24;
  const int filled = static_cast<int>(std::fmin(std::fmax(done, 0.0), 1.0) * kBarWidth);
  std::string bar(filled, '#');
  bar.resize(kBarWidth, '-');
  return bar;
}

void Progress::fraction(double done, const std::string& detail) {
  if (!interactive_) return;
  const double now =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  if (done < 1 && last_drawn_s_ >= 0 && now - last_drawn_s_ < 0.1) return;
  last_drawn_s_ = now;
  clear_line();
  std::fprintf(out_, "[%s] %3.0f%% %s", bar(done).c_str(), done * 100, detail.c_str());
  std::fflush(out_);
  line_open_ = true;
}

void Progress::update(const ProgressSample& s, bool log_line) {
  if (interactive_) {
    double done = s.total_steps > 0 ? static_cast<double>(s.step) / s.total_steps : 0;
    clear_line();
    std::fprintf(out_, "[%s] %3.0f%% step %lld/%lld | loss %.4f | %.0f %s | lr %.3g | ETA %s", bar(done).c_str(),
                 done * 100, (long long)s.step, (long long)s.total_steps, s.loss, s.throughput, s.unit, s.lr,
                 format_duration(s.seconds_left).c_str());
    std::fflush(out_);
    line_open_ = true;
  } else if (log_line) {
    std::fprintf(out_, "step %lld/%lld loss %.4f %s %.0f lr %.4g eta %s\n", (long long)s.step,
                 (long long)s.total_steps, s.loss, s.unit, s.throughput, s.lr,
                 format_duration(s.seconds_left).c_str());
    std::fflush(out_);
  }
}

void Progress::message(const std::string& text) {
  clear_line();
  std::fprintf(out_, "%s\n", text.c_str());
  std::fflush(out_);
}

void Progress::finish() {
  if (line_open_) std::fputc('\n', out_);
  line_open_ = false;
  std::fflush(out_);
}

}  // namespace meshtrain
