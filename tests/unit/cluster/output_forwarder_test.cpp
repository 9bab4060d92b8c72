// The output forwarder: prefixed lines, partial lines kept until complete,
// and on a terminal a redrawn status line kept at the bottom.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "meshtrain/cluster/output_forwarder.hpp"

namespace meshtrain {
namespace {

// Collects what the forwarder writes.
class Capture {
 public:
  Capture() : f_(open_memstream(&buf_, &size_)) {}
  ~Capture() {
    std::fclose(f_);
    std::free(buf_);
  }
  std::FILE* file() { return f_; }
  std::string text() {
    std::fflush(f_);
    return std::string(buf_, size_);
  }

 private:
  char* buf_ = nullptr;
  size_t size_ = 0;
  std::FILE* f_;
};

TEST(OutputForwarder, PrefixesCompleteLinesAndKeepsPartialOnes) {
  Capture out;
  OutputForwarder fwd(out.file(), false);
  std::string a, b;
  fwd.feed("worker 0", a, "hello\nwor");
  fwd.feed("worker 1", b, "other\n");
  fwd.feed("worker 0", a, "ld\n");
  fwd.feed("worker 0", a, "tail");
  fwd.flush("worker 0", a);
  EXPECT_EQ(out.text(), "[worker 0] hello\n[worker 1] other\n[worker 0] world\n[worker 0] tail\n");
}

TEST(OutputForwarder, RedrawsAStatusLineOnATerminal) {
  Capture out;
  OutputForwarder fwd(out.file(), true);
  std::string a, b;
  fwd.feed("worker 0", a, "\r\033[2K[##--] 50%");
  fwd.feed("worker 1", b, "note\n");  // printed above the bar, which is drawn again
  fwd.feed("worker 0", a, "\r\033[2K[####] 100%\n");  // the final bar becomes a line
  EXPECT_EQ(out.text(),
            "[worker 0] [##--] 50%"
            "\r\033[2K[worker 1] note\n[worker 0] [##--] 50%"
            "\r\033[2K[worker 0] [####] 100%\n");
}

TEST(OutputForwarder, ElsewhereRedrawsWaitForTheNewline) {
  Capture out;
  OutputForwarder fwd(out.file(), false);
  std::string a;
  fwd.feed("worker 0", a, "\r\033[2Kbar 1");
  fwd.feed("worker 0", a, "\r\033[2Kbar 2\n");
  EXPECT_EQ(out.text(), "[worker 0] bar 2\n");
}

TEST(OutputForwarder, KeepsEachReplicasLastLines) {
  Capture out;
  OutputForwarder fwd(out.file(), false);
  std::string a, b;
  for (int i = 1; i <= 7; ++i) fwd.feed("worker 0", a, "line " + std::to_string(i) + "\n\n");  // blank lines: not kept
  fwd.feed("worker 1", b, "only\n");
  fwd.line("run", "the supervisor's own line");
  EXPECT_EQ(fwd.recent_lines("worker 0"),
            (std::vector<std::string>{"line 3", "line 4", "line 5", "line 6", "line 7"}));
  EXPECT_EQ(fwd.recent_lines("worker 1"), (std::vector<std::string>{"only"}));
  EXPECT_TRUE(fwd.recent_lines("run").empty());
  std::string long_line(1000, 'x');
  long_line += '\n';
  fwd.feed("worker 1", b, long_line);  // a long line is cut
  EXPECT_EQ(fwd.recent_lines("worker 1").back().size(), OutputForwarder::kRecentLineChars);
  fwd.forget_recent_lines("worker 1");
  EXPECT_TRUE(fwd.recent_lines("worker 1").empty());
}

}  // namespace
}  // namespace meshtrain
