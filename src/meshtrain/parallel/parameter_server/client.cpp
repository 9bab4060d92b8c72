#include "meshtrain/parallel/parameter_server/client.hpp"

#include <algorithm>
#include <cstring>

#include "meshtrain/core/error.hpp"

namespace meshtrain::parallel::ps {

namespace tcp = comm::tcp;

namespace {
// Slack over the servers' own timeout, so a server's explanation (an Error
// reply) arrives before we give up on it.
constexpr std::chrono::seconds kReplySlack{5};
}  // namespace

Client::Client(const ParamStore& layout, ClientOptions options) : options_(std::move(options)) {
  const auto shards = plan_shards(layout, static_cast<int>(options_.servers.size()));
  const auto deadline = Clock::now() + options_.timeout;
  for (size_t j = 0; j < shards.size(); ++j) {
    const tcp::Endpoint& to = options_.servers[j];
    const std::string what = "parameter server " + std::to_string(j);
    Server s;
    s.shard = shards[j];
    s.conn = std::make_unique<Connection>(tcp::connect_with_retry(to, deadline, what), what + " at " + to.str());
    HelloPayload hello{.token = options_.token, .job_id = options_.job_id, .world_size = options_.world_size,
                       .begin = s.shard.begin, .end = s.shard.end, .flat_size = layout.flat_size()};
    s.conn->send(Kind::Hello, options_.rank, 0, 0, encode_hello(hello), deadline);
    servers_.push_back(std::move(s));
  }
  for (size_t j = 0; j < servers_.size(); ++j) {
    Connection& c = *servers_[j].conn;
    Message m;
    const auto st = c.receive(m, deadline);
    if (st != Connection::Status::Message)
      throw CommError(c.peer() + (st == Connection::Status::Eof ? " closed the connection" : " did not answer") +
                      " after Hello");
    if (m.header.kind == Kind::Error) throw CommError(c.peer() + " refused this worker: " + m.payload);
    if (m.header.kind != Kind::Welcome)
      throw CommError(c.peer() + " answered Hello with " + std::string(kind_name(m.header.kind)));
    if (j == 0) {
      initial_clock_ = m.header.clock;
      server_step_ = m.header.step;
    }
  }
}

Client::~Client() = default;

template <class PayloadFn, class ReplyFn>
bool Client::round(Kind kind, Kind expect, PayloadFn payload_for, ReplyFn on_reply) {
  const auto deadline = Clock::now() + options_.timeout + kReplySlack;
  bool done = false;
  std::string failure;  // the first server that failed, reported unless another said Done
  auto note = [&](const std::string& why) {
    if (failure.empty()) failure = why;
  };
  std::vector<bool> sent(servers_.size(), false);
  for (size_t j = 0; j < servers_.size(); ++j) {
    Server& s = servers_[j];
    try {
      s.conn->send(kind, options_.rank, s.version, 0, payload_for(j), deadline);
      sent[j] = true;
    } catch (const CommError& e) {
      note(e.what());
    }
  }
  for (size_t j = 0; j < servers_.size(); ++j) {
    if (!sent[j]) continue;
    Server& s = servers_[j];
    Message m;
    Connection::Status st;
    try {
      st = s.conn->receive(m, deadline);
    } catch (const CommError& e) {
      note(e.what());
      continue;
    }
    if (st == Connection::Status::Eof) {
      note(s.conn->peer() + " closed the connection (did the server die?)");
    } else if (st == Connection::Status::Timeout) {
      note(s.conn->peer() + " did not answer " + std::string(kind_name(kind)) + " within " +
           std::to_string(std::chrono::duration_cast<std::chrono::seconds>(options_.timeout + kReplySlack).count()) +
           " s");
    } else if (m.header.kind == Kind::Done) {
      done = true;
    } else if (m.header.kind == Kind::Error) {
      note(s.conn->peer() + ": " + m.payload);
    } else if (m.header.kind != expect) {
      note(s.conn->peer() + " answered " + std::string(kind_name(kind)) + " with " +
           std::string(kind_name(m.header.kind)));
    } else {
      on_reply(j, m);
    }
  }
  if (done) return false;
  if (!failure.empty()) throw CommError(failure);
  return true;
}

bool Client::pull(ParamStore& store) {
  return round(
      Kind::Pull, Kind::Params, [](size_t) { return std::string_view(); },
      [&](size_t j, const Message& m) {
        Server& s = servers_[j];
        if (m.payload.size() != s.shard.size() * sizeof(float))
          throw CommError(s.conn->peer() + " sent " + std::to_string(m.payload.size()) + " bytes of parameters, expected " +
                          std::to_string(s.shard.size() * sizeof(float)));
        if (store.on_host()) {
          std::memcpy(store.params().data() + s.shard.begin, m.payload.data(), m.payload.size());
        } else {  // a worker on a device: through a host copy (the host-staged path, docs/gpu.md)
          staged_.resize(s.shard.size());
          std::memcpy(staged_.data(), m.payload.data(), m.payload.size());
          store.upload_params_range(s.shard.begin, staged_);
        }
        s.version = m.header.step;
        if (j == 0) server_step_ = m.header.step;
      });
}

bool Client::push(const ParamStore& store) {
  const float* grads = store.on_host() ? store.grads().data() : nullptr;
  if (!grads) {  // a worker on a device: its gradients downloaded once, sent shard by shard
    staged_.resize(store.flat_size());
    store.download_grads(staged_);
    grads = staged_.data();
  }
  int64_t staleness = 0;
  const bool more = round(
      Kind::Push, Kind::Ack,
      [&](size_t j) {
        const ShardRange& r = servers_[j].shard;
        return std::string_view(reinterpret_cast<const char*>(grads + r.begin), r.size() * sizeof(float));
      },
      [&](size_t j, const Message& m) {
        staleness = std::max(staleness, m.header.clock);
        if (j == 0) server_step_ = m.header.step;
      });
  last_staleness_ = staleness;
  return more;
}

}  // namespace meshtrain::parallel::ps
