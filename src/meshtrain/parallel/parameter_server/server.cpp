#include "meshtrain/parallel/parameter_server/server.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "meshtrain/comm/rendezvous/frame.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/parallel/parameter_server/connection.hpp"

namespace meshtrain::parallel::ps {

namespace tcp = comm::tcp;
using namespace std::chrono_literals;

namespace {
// How often blocked threads look up from their socket to see whether the
// server is stopping.
constexpr auto kPollPeriod = 200ms;
}  // namespace

struct Server::Impl {
  ServerOptions options;
  std::vector<ShardRange> shards;
  size_t flat_size = 0;
  std::unique_ptr<ServerState> state;
  tcp::Fd listener;
  uint16_t port = 0;
  std::atomic<bool> stopping{false};
  std::thread acceptor;
  std::mutex threads_mu;
  std::vector<std::thread> threads;

  int index() const { return options.state.index; }
  int coordinator_rank() const { return options.state.num_workers; }  // server 0's world rank
  const ShardRange& shard() const { return shards[static_cast<size_t>(index())]; }

  template <class... Args>
  void log(const char* fmt, Args... args) {
    if (!options.log) return;
    char line[512];
    std::snprintf(line, sizeof line, fmt, args...);
    std::fprintf(options.log, "ps-server %d: %s\n", index(), line);
    std::fflush(options.log);
  }

  void accept_loop() {
    while (!stopping) {
      pollfd p{listener.get(), POLLIN, 0};
      if (tcp::poll_until(&p, 1, Clock::now() + kPollPeriod) == 0) continue;
      tcp::Fd fd(::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd.valid()) continue;  // EAGAIN, or a client that gave up
      std::lock_guard lock(threads_mu);
      threads.emplace_back([this, f = std::move(fd)]() mutable { serve_connection(std::move(f)); });
    }
  }

  // One message by the deadline, looking up every kPollPeriod so a stopping
  // server is not held up by a quiet client. Throws CommError otherwise.
  Message receive_one(Connection& conn, Clock::time_point deadline, const char* waiting_for) {
    Message m;
    while (!stopping) {
      switch (conn.receive(m, std::min(deadline, Clock::now() + kPollPeriod))) {
        case Connection::Status::Message: return m;
        case Connection::Status::Eof: throw CommError("closed the connection before sending " + std::string(waiting_for));
        case Connection::Status::Timeout:
          if (Clock::now() >= deadline) throw CommError("sent no " + std::string(waiting_for) + " in time");
      }
    }
    throw CommError("server stopping");
  }

  void serve_connection(tcp::Fd fd) {
    const std::string peer = tcp::peer_description(fd.get());
    try {
      Connection conn(std::move(fd), "client at " + peer);
      const Message m = receive_one(conn, Clock::now() + options.timeout, "Hello");
      const std::string refusal = check_hello(m);
      if (!refusal.empty()) {
        log("refused %s: %s", peer.c_str(), refusal.c_str());
        conn.send(Kind::Error, -1, 0, 0, refusal, Clock::now() + options.timeout);
        return;
      }
      const int rank = m.header.rank;
      if (rank == coordinator_rank()) return serve_coordinator(conn);
      serve_worker(conn, rank);
    } catch (const Error& e) {
      log("connection from %s dropped: %s", peer.c_str(), e.what());
    }
  }

  // Empty when the Hello is from this job and for our shard; else why not.
  std::string check_hello(const Message& m) {
    if (m.header.kind != Kind::Hello) return "expected Hello first, got " + std::string(kind_name(m.header.kind));
    auto hello = decode_hello(m.payload);
    if (!hello) return "malformed Hello";
    if (!comm::rendezvous::tokens_equal(hello->token, options.token)) return "wrong job token";
    if (hello->job_id != options.job_id)
      return "job id '" + hello->job_id + "' is not this server's '" + options.job_id + "'";
    if (hello->world_size != options.world_size)
      return "WORLD_SIZE " + std::to_string(hello->world_size) + " is not this job's " +
             std::to_string(options.world_size);
    const int rank = m.header.rank;
    const bool coordinator = rank == coordinator_rank() && index() != 0;
    if (!coordinator && (rank < 0 || rank >= options.state.num_workers))
      return "rank " + std::to_string(rank) + " is not a worker rank (0.." +
             std::to_string(options.state.num_workers - 1) + ")";
    if (hello->flat_size != flat_size || hello->begin != shard().begin || hello->end != shard().end)
      return "model layout differs: this server holds elements [" + std::to_string(shard().begin) + ", " +
             std::to_string(shard().end) + ") of " + std::to_string(flat_size) + ", the client expects [" +
             std::to_string(hello->begin) + ", " + std::to_string(hello->end) + ") of " +
             std::to_string(hello->flat_size) + " (same model config?)";
    return {};
  }

  void serve_worker(Connection& conn, int rank) {
    const ServerState::Welcome w = state->join(rank);
    log("worker rank %d %s at clock %lld (server step %lld)", rank, w.rejoined ? "rejoined" : "joined",
        (long long)w.clock, (long long)w.step);
    try {
      conn.send(Kind::Welcome, -1, w.step, w.clock, {}, Clock::now() + options.timeout);
      worker_loop(conn, rank);
    } catch (const Error& e) {
      log("worker rank %d: %s", rank, e.what());
    }
    state->leave(rank);
    log("worker rank %d left", rank);
  }

  void worker_loop(Connection& conn, int rank) {
    Message m;
    std::string payload;
    auto last_heard = Clock::now();
    while (!stopping) {
      const auto st = conn.receive(m, Clock::now() + kPollPeriod);
      if (st == Connection::Status::Eof) return;
      if (st == Connection::Status::Timeout) {
        if (Clock::now() - last_heard > options.timeout)
          throw CommError("silent for " + std::to_string(options.timeout.count() / 1000) + " s: dropped");
        continue;
      }
      last_heard = Clock::now();
      state->touch();
      const auto deadline = Clock::now() + options.timeout;
      if (m.header.kind == Kind::Pull) {
        const auto turn = state->wait_turn(rank, deadline);
        if (turn == ServerState::Turn::Closed) return;
        if (turn == ServerState::Turn::Timeout) {
          const std::string why = "waited " + std::to_string(options.timeout.count() / 1000) +
                                  " s for the slowest worker (" + state->slowest_description() + ")";
          conn.send(Kind::Error, -1, 0, 0, why, deadline);
          throw CommError(why);
        }
        int64_t version = 0;
        if (turn == ServerState::Turn::Done || !state->read_params(payload, version))
          conn.send(Kind::Done, -1, state->step(), 0, {}, deadline);
        else
          conn.send(Kind::Params, -1, version, 0, payload, deadline);
      } else if (m.header.kind == Kind::Push) {
        if (m.payload.size() != shard().size() * sizeof(float))
          throw CommError("push of " + std::to_string(m.payload.size()) + " bytes, expected " +
                          std::to_string(shard().size() * sizeof(float)));
        int64_t step = 0, staleness = 0;
        if (state->apply_push(rank, m.header.step, reinterpret_cast<const float*>(m.payload.data()), step, staleness))
          conn.send(Kind::Ack, -1, step, staleness, {}, deadline);
        else
          conn.send(Kind::Done, -1, state->step(), 0, {}, deadline);
      } else {
        throw CommError("unexpected " + std::string(kind_name(m.header.kind)) + " from a worker");
      }
    }
  }

  // Server 0 asks for our final shard: the job is over.
  void serve_coordinator(Connection& conn) {
    const auto deadline = Clock::now() + options.timeout;
    conn.send(Kind::Welcome, -1, state->step(), 0, {}, deadline);
    const Message m = receive_one(conn, deadline, "Finish");
    if (m.header.kind != Kind::Finish)
      throw CommError("server 0 sent " + std::string(kind_name(m.header.kind)) + ", expected Finish");
    int64_t step = 0;
    const std::string shard_bytes = state->finish(step);
    conn.send(Kind::Shard, -1, step, 0, shard_bytes, deadline);
    log("finished at server step %lld: shard sent to server 0", (long long)step);
  }

  // Server 0, once done: every server's final shard, assembled in the full layout.
  FinalState gather() {
    FinalState out;
    out.params.assign(flat_size, 0.0f);
    const auto names = state->state_buffer_names();
    for (const auto& n : names) out.state.emplace_back(n, std::vector<float>(flat_size, 0.0f));
    for (int j = 0; j < options.num_servers; ++j) {
      std::string bytes;
      int64_t step = 0;
      if (j == 0) {
        bytes = state->finish(step);
        out.step = step;
      } else {
        bytes = fetch_shard(j, step);
        log("gathered shard %d (server step %lld)", j, (long long)step);
      }
      const ShardRange& s = shards[static_cast<size_t>(j)];
      const size_t n = s.size();
      if (bytes.size() != n * sizeof(float) * (1 + names.size()))
        throw CommError("server " + std::to_string(j) + " sent a final shard of " + std::to_string(bytes.size()) +
                        " bytes, expected " + std::to_string(n * sizeof(float) * (1 + names.size())));
      std::memcpy(out.params.data() + s.begin, bytes.data(), n * sizeof(float));
      for (size_t b = 0; b < names.size(); ++b)
        std::memcpy(out.state[b].second.data() + s.begin, bytes.data() + (b + 1) * n * sizeof(float),
                    n * sizeof(float));
    }
    return out;
  }

  std::string fetch_shard(int j, int64_t& step) {
    const tcp::Endpoint& to = options.servers.at(static_cast<size_t>(j));
    const std::string what = "parameter server " + std::to_string(j);
    const auto deadline = Clock::now() + options.timeout;
    Connection conn(tcp::connect_with_retry(to, deadline, what), what + " at " + to.str());
    const ShardRange& s = shards[static_cast<size_t>(j)];
    HelloPayload hello{.token = options.token, .job_id = options.job_id, .world_size = options.world_size,
                       .begin = s.begin, .end = s.end, .flat_size = flat_size};
    conn.send(Kind::Hello, coordinator_rank(), 0, 0, encode_hello(hello), deadline);
    Message m;
    for (Kind expect : {Kind::Welcome, Kind::Shard}) {
      if (conn.receive(m, deadline) != Connection::Status::Message)
        throw CommError(conn.peer() + " did not send its final shard (died or timed out)");
      if (m.header.kind == Kind::Error) throw CommError(conn.peer() + " refused: " + m.payload);
      if (m.header.kind != expect)
        throw CommError(conn.peer() + " sent " + std::string(kind_name(m.header.kind)) + ", expected " +
                        std::string(kind_name(expect)));
      if (expect == Kind::Welcome) conn.send(Kind::Finish, coordinator_rank(), 0, 0, {}, deadline);
    }
    step = m.header.step;
    return std::move(m.payload);
  }

  void stop() {
    stopping = true;
    state->close();
    if (acceptor.joinable()) acceptor.join();
    std::vector<std::thread> all;
    {
      std::lock_guard lock(threads_mu);
      all.swap(threads);
    }
    for (auto& t : all) t.join();
  }
};

Server::Server(const ParamStore& initial, ServerOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.options = std::move(options);
  const int j = s.options.state.index;
  if (j < 0 || j >= s.options.num_servers || s.options.servers.size() != static_cast<size_t>(s.options.num_servers))
    throw ConfigError("parameter server " + std::to_string(j) + ": need one address per server (" +
                      std::to_string(s.options.num_servers) + "), got " + std::to_string(s.options.servers.size()));
  s.shards = plan_shards(initial, s.options.num_servers);
  s.flat_size = initial.flat_size();
  s.state = std::make_unique<ServerState>(initial, s.shard(), s.options.state);
  const tcp::Endpoint& me = s.options.servers[static_cast<size_t>(j)];
  s.listener = tcp::listen_on(me.host, me.port);
  s.port = tcp::local_endpoint(s.listener.get()).port;
  s.acceptor = std::thread([&s] { s.accept_loop(); });
}

Server::~Server() { impl_->stop(); }

uint16_t Server::port() const { return impl_->port; }

void Server::shutdown() { impl_->stopping = true; }

ServerResult Server::serve() {
  Impl& s = *impl_;
  s.log("serving elements [%zu, %zu) of %zu (%zu tensors) on port %u for %d workers", s.shard().begin,
        s.shard().end, s.flat_size, s.shard().end_view - s.shard().first_view, (unsigned)s.port,
        s.options.state.num_workers);
  const std::string me = "parameter server " + std::to_string(s.index());
  try {
    // Wait for the end, giving up after `timeout` without a request from anyone.
    while (!s.state->wait_done(Clock::now() + kPollPeriod)) {
      if (s.stopping) throw CommError(me + ": stopped");
      if (Clock::now() - s.state->last_activity() > s.options.timeout)
        throw CommError(me + ": no request from any worker" + (s.index() ? " or server 0" : "") + " for " +
                        std::to_string(s.options.timeout.count() / 1000) + " s; giving up");
    }
    // Workers learn of the end on their next request and hang up.
    s.state->wait_drained(Clock::now() + s.options.drain);
    ServerResult result;
    if (s.index() == 0) result.final_state = s.gather();
    s.stop();
    result.step = s.state->step();
    result.staleness = s.state->staleness();
    result.workers = s.state->workers();
    return result;
  } catch (...) {
    s.stop();
    throw;
  }
}

}  // namespace meshtrain::parallel::ps
