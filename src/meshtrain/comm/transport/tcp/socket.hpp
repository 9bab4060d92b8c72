#pragma once
// POSIX socket helpers shared by the TCP transport and the rendezvous store:
// an owning file descriptor, listen/connect with readable errors, and
// deadline-bounded reads and writes. Every blocking wait here is a poll()
// with the time left until a deadline, so nothing can hang forever.
#include <poll.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace meshtrain::comm::tcp {

using Clock = std::chrono::steady_clock;

// Owns one file descriptor; closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset();

 private:
  int fd_ = -1;
};

// "host:port"; IPv6 hosts are written in brackets, "[::1]:29500".
struct Endpoint {
  std::string host;
  uint16_t port = 0;
  std::string str() const;
};
// Throws CommError for anything but host:port with a port in [0, 65535].
Endpoint parse_endpoint(std::string_view text);

// A listening socket on host:port (port 0 = ephemeral). An address in use is
// CommError "port 29500 on 127.0.0.1 is in use", raised at once.
Fd listen_on(const std::string& host, uint16_t port);

// Connects, retrying refused or unreachable attempts until `deadline` (the
// other side may not be listening yet). `what` names the other side in errors.
Fd connect_with_retry(const Endpoint& to, Clock::time_point deadline, std::string_view what);

Endpoint local_endpoint(int fd);
std::string peer_description(int fd);  // "127.0.0.1:43210", for log lines

void set_nonblocking(int fd);
// TCP_NODELAY, socket buffers of kDataSocketBufferBytes each way and, unless
// empty, the congestion control `congestion` (congestion.hpp; best effort:
// resolve_congestion() has already checked that the kernel accepts it).
void tune_data_socket(int fd, const std::string& congestion = "");
inline constexpr int kDataSocketBufferBytes = 4 << 20;

// Writes all of `bytes` before `deadline`; throws CommError naming `what` on
// timeout, reset or a closed connection. Works on blocking or not.
void write_all(int fd, std::string_view bytes, Clock::time_point deadline, std::string_view what);

enum class ReadStatus { Data, Eof, Timeout };
// Appends what is available, at most `max_bytes` (waiting until data, EOF or
// the deadline), to `buf`. A reset reads as Eof; other errors throw CommError.
ReadStatus read_some(int fd, std::string& buf, Clock::time_point deadline, std::string_view what,
                     size_t max_bytes = 16384);

// poll() with the time left until `deadline`; returns poll's result (0 at the
// deadline), retrying EINTR.
int poll_until(pollfd* fds, size_t count, Clock::time_point deadline);

long long ms_between(Clock::time_point from, Clock::time_point to);
std::string errno_text(int err);

// One line to stderr ("meshtrain tcp: <level>: ...", level "warning" or
// "error": every line of it reports a problem), written with a single
// write(2) so lines from several ranks' threads do not interleave.
void log_line(std::string_view level, std::string_view message);

}  // namespace meshtrain::comm::tcp
