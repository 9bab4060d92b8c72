#include "meshtrain/comm/transport/tcp/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "meshtrain/comm/transport/tcp/congestion.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::tcp {
namespace {

struct AddrInfoList {
  addrinfo* head = nullptr;
  ~AddrInfoList() {
    if (head) freeaddrinfo(head);
  }
};

// Resolves host:port; an empty host with `passive` is the wildcard address.
int resolve(const std::string& host, uint16_t port, bool passive, AddrInfoList& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  const std::string service = std::to_string(port);
  return getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out.head);
}

Endpoint endpoint_of(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = "?";
  Endpoint e;
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    e.port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
    e.port = ntohs(a->sin6_port);
  }
  e.host = text;
  return e;
}

bool retryable_connect_error(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == ENETUNREACH || err == EHOSTUNREACH ||
         err == ECONNRESET || err == ECONNABORTED || err == EAGAIN;
}

// One non-blocking connect attempt bounded by `deadline`; returns the socket
// or sets `err`.
Fd try_connect(const addrinfo& ai, Clock::time_point deadline, int& err) {
  Fd fd(socket(ai.ai_family, ai.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai.ai_protocol));
  if (!fd.valid()) {
    err = errno;
    return Fd();
  }
  if (connect(fd.get(), ai.ai_addr, ai.ai_addrlen) == 0) return fd;
  if (errno != EINPROGRESS) {
    err = errno;
    return Fd();
  }
  pollfd p{fd.get(), POLLOUT, 0};
  if (poll_until(&p, 1, deadline) <= 0) {
    err = ETIMEDOUT;
    return Fd();
  }
  socklen_t len = sizeof err;
  err = 0;
  getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  return err == 0 ? std::move(fd) : Fd();
}

}  // namespace

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

int Fd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string Endpoint::str() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Endpoint parse_endpoint(std::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == text.size())
    throw CommError("address '" + std::string(text) + "' is not host:port");
  std::string_view host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  unsigned long port = 0;
  for (char c : text.substr(colon + 1)) {
    if (c < '0' || c > '9' || port > 65535) throw CommError("bad port in '" + std::string(text) + "'");
    port = port * 10 + static_cast<unsigned long>(c - '0');
  }
  if (port > 65535) throw CommError("bad port in '" + std::string(text) + "'");
  return Endpoint{std::string(host), static_cast<uint16_t>(port)};
}

Fd listen_on(const std::string& host, uint16_t port) {
  AddrInfoList list;
  if (int rc = resolve(host, port, true, list); rc != 0)
    throw CommError("cannot resolve listen address '" + host + "': " + gai_strerror(rc));
  const addrinfo& ai = *list.head;
  Fd fd(socket(ai.ai_family, ai.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai.ai_protocol));
  if (!fd.valid()) throw CommError("socket(): " + errno_text(errno));
  const int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // restart past TIME_WAIT
  if (bind(fd.get(), ai.ai_addr, ai.ai_addrlen) != 0) {
    const int err = errno;
    const std::string where = "port " + std::to_string(port) + " on " + (host.empty() ? "*" : host);
    if (err == EADDRINUSE) throw CommError(where + " is in use");
    throw CommError("cannot listen on " + where + ": " + errno_text(err));
  }
  if (listen(fd.get(), 1024) != 0) throw CommError("listen(): " + errno_text(errno));
  return fd;
}

Fd connect_with_retry(const Endpoint& to, Clock::time_point deadline, std::string_view what) {
  const auto start = Clock::now();
  auto backoff = std::chrono::milliseconds(5);
  std::string last_error = "no attempt";
  for (;;) {
    AddrInfoList list;
    if (int rc = resolve(to.host, to.port, false, list); rc != 0) {
      last_error = gai_strerror(rc);
    } else {
      int err = 0;
      Fd fd = try_connect(*list.head, deadline, err);
      if (fd.valid()) return fd;
      if (!retryable_connect_error(err))
        throw CommError("cannot connect to " + std::string(what) + " at " + to.str() + ": " + errno_text(err));
      last_error = errno_text(err);
    }
    const auto now = Clock::now();
    if (now + backoff >= deadline)
      throw CommError("timed out after " + std::to_string(ms_between(start, now)) + " ms connecting to " +
                      std::string(what) + " at " + to.str() + " (last error: " + last_error + ")");
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
}

Endpoint local_endpoint(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw CommError("getsockname(): " + errno_text(errno));
  return endpoint_of(addr);
}

std::string peer_description(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "an unknown peer";
  return endpoint_of(addr).str();
}

void set_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
    throw CommError("fcntl(O_NONBLOCK): " + errno_text(errno));
}

void tune_data_socket(int fd, const std::string& congestion) {
  const int one = 1;
  const int bytes = kDataSocketBufferBytes;
  // Best effort: the kernel caps the buffers at net.core.[rw]mem_max.
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
  if (!congestion.empty()) set_congestion(fd, congestion);
}

void write_all(int fd, std::string_view bytes, Clock::time_point deadline, std::string_view what) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      if (poll_until(&p, 1, deadline) == 0) throw CommError("timed out writing to " + std::string(what));
      continue;
    }
    if (errno == EPIPE || errno == ECONNRESET) throw CommError(std::string(what) + " closed the connection");
    throw CommError("writing to " + std::string(what) + " failed: " + errno_text(errno));
  }
}

ReadStatus read_some(int fd, std::string& buf, Clock::time_point deadline, std::string_view what,
                     size_t max_bytes) {
  char chunk[16384];
  for (;;) {
    const ssize_t n = ::recv(fd, chunk, std::min(sizeof chunk, max_bytes), 0);
    if (n > 0) {
      buf.append(chunk, static_cast<size_t>(n));
      return ReadStatus::Data;
    }
    if (n == 0) return ReadStatus::Eof;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      if (errno == ECONNRESET) return ReadStatus::Eof;
      throw CommError("reading from " + std::string(what) + " failed: " + errno_text(errno));
    }
    pollfd p{fd, POLLIN, 0};
    if (poll_until(&p, 1, deadline) == 0) return ReadStatus::Timeout;
  }
}

int poll_until(pollfd* fds, size_t count, Clock::time_point deadline) {
  for (;;) {
    const long long left = ms_between(Clock::now(), deadline);
    // Round up, so a wait never returns early and spins.
    const int wait_ms = left <= 0 ? 0 : static_cast<int>(std::min<long long>(left + 1, 1 << 30));
    const int rc = ::poll(fds, count, wait_ms);
    if (rc > 0) return rc;
    if (rc == 0 && Clock::now() >= deadline) return 0;
    if (rc < 0 && errno != EINTR) throw CommError("poll(): " + errno_text(errno));
  }
}

long long ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
}

std::string errno_text(int err) { return std::strerror(err); }

void log_line(std::string_view level, std::string_view message) {
  std::string line = "meshtrain tcp: ";
  line.append(level);
  line.append(": ");
  line.append(message);
  line.push_back('\n');
  [[maybe_unused]] ssize_t rc = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace meshtrain::comm::tcp
