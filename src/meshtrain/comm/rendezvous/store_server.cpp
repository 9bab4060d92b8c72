#include "meshtrain/comm/rendezvous/store_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "meshtrain/comm/transport/tcp/socket.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::rendezvous {

using tcp::Fd;

struct TcpStore::State {
  // One client connection. `in` holds bytes not yet decoded (never more than one
  // frame plus one read, since decode_frame rejects oversized headers); `out`
  // holds replies not yet written.
  struct Conn {
    Fd fd;
    std::string peer;  // "host:port", for log lines
    std::string in;
    std::string out;
    bool authenticated = false;
    bool dead = false;
    int rank = -1;
  };

  StoreOptions options;
  Fd listener;
  uint16_t port = 0;
  Fd wake_read, wake_write;  // a byte on this pipe stops the thread
  std::vector<std::unique_ptr<Conn>> conns;
  std::map<std::string, std::string, std::less<>> kv;
  std::map<std::string, std::vector<Conn*>, std::less<>> waiters;  // Gets not yet answerable
  mutable std::mutex failure_mutex;
  std::string failure;
  std::thread thread;

  std::string job_failure() const {
    std::lock_guard lock(failure_mutex);
    return failure;
  }

  void reply(Conn& c, FrameType type, std::string_view key, std::string_view value) {
    c.out += encode_frame(type, key, value);
    flush(c);
  }

  void flush(Conn& c) {
    while (!c.out.empty() && !c.dead) {
      const ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (n > 0) {
        c.out.erase(0, static_cast<size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) c.dead = true;
        return;
      }
    }
  }

  // Drops a connection that broke the protocol, with a log line; a short
  // Error reply tells an honest but misconfigured client why.
  void drop(Conn& c, const std::string& why, bool tell_client) {
    tcp::log_line("warning", "rendezvous store dropped the connection from " + c.peer + ": " + why);
    if (tell_client) reply(c, FrameType::Error, "", why);
    c.dead = true;
  }

  // A contradiction between ranks: the whole job fails.
  void fail_job(Conn& c, const std::string& why) {
    {
      std::lock_guard lock(failure_mutex);
      if (failure.empty()) failure = why;
    }
    tcp::log_line("error", "rendezvous store: job failed: " + why);
    reply(c, FrameType::Error, "", why);
    c.dead = true;
    for (auto& [key, list] : waiters)
      for (Conn* w : list) reply(*w, FrameType::Error, key, job_failure());
    waiters.clear();
  }

  void on_hello(Conn& c, const Frame& f) {
    const auto hello = parse_hello_value(f.value);
    if (!hello) return drop(c, "malformed hello", false);
    if (!tokens_equal(f.key, options.token)) return drop(c, "wrong token", true);
    if (hello->job_id != options.job_id)
      return drop(c, "job id '" + hello->job_id + "' is not '" + options.job_id + "'", true);
    const int world = options.world_size;
    const std::string who = "rank " + std::to_string(hello->rank) + " (" + c.peer + ")";
    if (hello->world_size != world)
      return fail_job(c, who + " says the world size is " + std::to_string(hello->world_size) +
                             " but the store (rank 0) says " + std::to_string(world));
    if (hello->rank < 0 || hello->rank >= world)
      return fail_job(c, who + " is outside [0, " + std::to_string(world) + ")");
    for (const auto& other : conns)
      if (other.get() != &c && !other->dead && other->authenticated && other->rank == hello->rank)
        return fail_job(c, "rank " + std::to_string(hello->rank) + " connected twice (from " + other->peer +
                               " and " + c.peer + "); do two jobs share a token and port?");
    c.authenticated = true;
    c.rank = hello->rank;
    if (const std::string f2 = job_failure(); !f2.empty()) return reply(c, FrameType::Error, "", f2);
    reply(c, FrameType::Ok, "", "");
  }

  void on_frame(Conn& c, const Frame& f) {
    if (!c.authenticated) {
      if (f.type != FrameType::Hello) return drop(c, "first frame is not a hello", false);
      return on_hello(c, f);
    }
    if (const std::string failed = job_failure(); !failed.empty())
      return reply(c, FrameType::Error, f.key, failed);
    if (f.type == FrameType::Set) {
      std::string& slot = kv[std::string(f.key)];
      slot.assign(f.value);
      reply(c, FrameType::Ok, f.key, "");
      if (auto it = waiters.find(f.key); it != waiters.end()) {
        for (Conn* w : it->second)
          if (!w->dead) reply(*w, FrameType::Value, it->first, slot);
        waiters.erase(it);
      }
    } else if (f.type == FrameType::Get) {
      if (auto it = kv.find(f.key); it != kv.end()) return reply(c, FrameType::Value, it->first, it->second);
      waiters[std::string(f.key)].push_back(&c);
    } else {
      drop(c, "unexpected " + std::string(frame_type_name(f.type)) + " frame", false);
    }
  }

  void on_readable(Conn& c) {
    char chunk[65536];
    while (!c.dead) {
      const ssize_t n = ::recv(c.fd.get(), chunk, sizeof chunk, 0);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
        c.dead = true;  // the client went away; nothing to report
        return;
      }
      if (n < 0) {
        if (errno == EINTR) continue;
        return;
      }
      c.in.append(chunk, static_cast<size_t>(n));
      size_t used = 0;
      while (!c.dead) {
        const DecodeResult r = decode_frame(std::string_view(c.in).substr(used), options.limits);
        if (r.status == DecodeStatus::Incomplete) break;
        if (r.status == DecodeStatus::Invalid) return drop(c, r.error, false);
        on_frame(c, r.frame);
        used += r.consumed;
      }
      c.in.erase(0, used);
    }
  }

  void accept_all() {
    for (;;) {
      Fd fd(accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd.valid()) return;  // EAGAIN, or a transient error: poll will wake us again
      auto c = std::make_unique<Conn>();
      c->peer = tcp::peer_description(fd.get());
      c->fd = std::move(fd);
      conns.push_back(std::move(c));
    }
  }

  void remove_dead() {
    for (auto& [key, list] : waiters) std::erase_if(list, [](Conn* w) { return w->dead; });
    std::erase_if(conns, [](const std::unique_ptr<Conn>& c) { return c->dead; });
  }

  void serve() {
    std::vector<pollfd> fds;
    for (;;) {
      fds.assign({{wake_read.get(), POLLIN, 0}, {listener.get(), POLLIN, 0}});
      for (const auto& c : conns)
        fds.push_back({c->fd.get(), static_cast<short>(POLLIN | (c->out.empty() ? 0 : POLLOUT)), 0});
      if (::poll(fds.data(), fds.size(), -1) < 0) continue;  // EINTR
      if (fds[0].revents) return;
      const size_t existing = conns.size();  // accept_all appends; their fds were not polled
      for (size_t i = 0; i < existing; ++i) {
        const short ev = fds[i + 2].revents;
        if (ev & POLLOUT) flush(*conns[i]);
        if (ev & (POLLIN | POLLHUP | POLLERR)) on_readable(*conns[i]);
      }
      if (fds[1].revents) accept_all();
      remove_dead();
    }
  }
};

TcpStore::TcpStore(StoreOptions options) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.options = std::move(options);
  if (s.options.world_size < 1)
    throw CommError("rendezvous store: world size " + std::to_string(s.options.world_size) + " is not positive");
  s.listener = tcp::listen_on(s.options.bind_addr, s.options.port);
  s.port = tcp::local_endpoint(s.listener.get()).port;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) throw CommError("pipe(): " + tcp::errno_text(errno));
  s.wake_read = Fd(pipe_fds[0]);
  s.wake_write = Fd(pipe_fds[1]);
  s.thread = std::thread([&s] { s.serve(); });
}

TcpStore::~TcpStore() {
  const char byte = 1;
  [[maybe_unused]] ssize_t rc = ::write(state_->wake_write.get(), &byte, 1);
  state_->thread.join();
}

uint16_t TcpStore::port() const { return state_->port; }

std::string TcpStore::failure() const { return state_->job_failure(); }

}  // namespace meshtrain::comm::rendezvous
