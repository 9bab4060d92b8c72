#pragma once
// Forwards the output of a job's replicas to one stream, a line at a time,
// each with a "[label] " prefix. On a terminal, a status line that a replica
// redraws in place ("\r" and text without a newline: the trainer's progress
// bar) is shown as it changes, on the bottom line, with everyone's complete
// lines printed above it. It also keeps each replica's last few lines, for
// the supervisor's summary of why a job failed.
#include <cstdio>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace meshtrain {

class OutputForwarder {
 public:
  OutputForwarder(std::FILE* out, bool terminal) : out_(out), terminal_(terminal) {}

  // Bytes read from one stream of a replica; `pending` keeps that stream's
  // partial line between calls.
  void feed(const std::string& label, std::string& pending, std::string_view data);
  // The stream ended: its partial line, if any, becomes a line.
  void flush(const std::string& label, std::string& pending);
  // A complete line: a replica's, or the supervisor's own.
  void line(const std::string& label, std::string_view text);

  // The last lines (up to kRecentLines, each cut to kRecentLineChars) that
  // feed() forwarded for a label, oldest first; the supervisor's own lines
  // are not kept.
  static constexpr size_t kRecentLines = 5, kRecentLineChars = 300;
  std::vector<std::string> recent_lines(const std::string& label) const;
  void forget_recent_lines(const std::string& label) { recent_.erase(label); }

 private:
  void clear_status();
  void draw_status();

  std::FILE* out_;
  bool terminal_;
  std::string status_;        // "[label] bar ..." on the bottom line; empty: none
  std::string status_owner_;  // whose status line it is
  std::map<std::string, std::deque<std::string>> recent_;  // label -> its last lines
};

}  // namespace meshtrain
