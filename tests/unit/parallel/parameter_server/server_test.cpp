// Servers and a client over loopback sockets against the serial computation:
// pushes applied by sharded servers equal optimizer steps on the whole store,
// bit for bit, and the gathered final state is that of the serial optimizer.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "meshtrain/core/error.hpp"
#include "meshtrain/optim/factory.hpp"
#include "ps_test_util.hpp"

namespace meshtrain::parallel::ps {
namespace {

using testing::bitwise_equal;

// P servers on ephemeral ports, each serving in its own thread.
struct Cluster {
  std::vector<std::unique_ptr<Server>> servers;
  std::vector<std::future<ServerResult>> results;
  std::vector<uint16_t> ports;

  Cluster(const ParamStore& initial, int P, int workers, int64_t steps, const std::string& optimizer = "adamw",
          int64_t max_staleness = -1) {
    servers.resize(size_t(P));
    ports.resize(size_t(P));
    // Servers 1.. first: server 0 must know their ports.
    for (int j = P - 1; j >= 0; --j) {
      ServerOptions o = testing::server_options(j, P, workers, steps);
      o.state.optimizer.kind = *parse_enum<OptimizerKind>(optimizer);
      o.state.max_staleness = max_staleness;
      for (int k = 1; k < P; ++k)
        if (k != j) o.servers[size_t(k)].port = ports[size_t(k)];
      servers[size_t(j)] = std::make_unique<Server>(initial, o);
      ports[size_t(j)] = servers[size_t(j)]->port();
    }
    for (auto& s : servers) results.push_back(std::async(std::launch::async, [&s] { return s->serve(); }));
  }
  // Stops servers still serving; waits for every serve() before the servers go.
  ~Cluster() {
    for (auto& s : servers) s->shutdown();
    for (auto& r : results) {
      try {
        if (r.valid()) r.get();
      } catch (const CommError&) {
      }
    }
  }
};

class PsServerMatchesSerial : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(PsServerMatchesSerial, PushesEqualDirectSteps) {
  const auto [P, optimizer_name] = GetParam();
  const int64_t steps = 4;
  ParamStore initial;
  testing::make_store(initial);
  Cluster cluster(initial, P, /*workers=*/1, steps, optimizer_name);

  // The serial twin: the same optimizer and schedule on the whole store.
  ServerOptions so = testing::server_options(0, P, 1, steps);
  so.state.optimizer.kind = *parse_enum<OptimizerKind>(optimizer_name);
  ParamStore ref;
  testing::make_store(ref);
  auto ref_opt = make_optimizer(so.state.optimizer, ref);

  ParamStore worker;
  testing::make_store(worker);
  std::fill(worker.params().begin(), worker.params().end(), 0.0f);
  {
    Client client(worker, testing::client_options(cluster.ports, 0, 1 + P));
    EXPECT_EQ(client.initial_clock(), 0);
    for (int k = 0; k < steps; ++k) {
      ASSERT_TRUE(client.pull(worker)) << k;
      ASSERT_TRUE(bitwise_equal(worker.params().data(), ref.params().data(), ref.flat_size())) << "before push " << k;
      EXPECT_EQ(client.server_step(), k);
      testing::set_grads(worker, k);
      testing::set_grads(ref, k);
      ASSERT_TRUE(client.push(worker)) << k;
      EXPECT_EQ(client.last_staleness(), 0);
      ref_opt->step(ref, float(scheduled_lr(so.state.schedule, so.state.base_lr, k)));
    }
    EXPECT_FALSE(client.pull(worker));  // server 0 has applied `steps` pushes: done
  }
  for (int j = 0; j < P; ++j) {
    ServerResult r = cluster.results[size_t(j)].get();
    EXPECT_EQ(r.step, steps) << j;
    EXPECT_EQ(r.staleness.pushes, steps);
    EXPECT_EQ(r.staleness.max, 0);
    ASSERT_EQ(r.workers.size(), 1u);
    EXPECT_EQ(r.workers[0].clock, steps);
    EXPECT_EQ(r.workers[0].pushes, steps);
    if (j != 0) {
      EXPECT_FALSE(r.final_state);
      continue;
    }
    ASSERT_TRUE(r.final_state);
    const FinalState& f = *r.final_state;
    EXPECT_EQ(f.step, steps);
    ASSERT_EQ(f.params.size(), ref.flat_size());
    EXPECT_TRUE(bitwise_equal(f.params.data(), ref.params().data(), ref.flat_size()));
    auto ref_state = ref_opt->state_buffers();
    ASSERT_EQ(f.state.size(), ref_state.size());
    for (size_t b = 0; b < ref_state.size(); ++b) {
      EXPECT_EQ(f.state[b].first, ref_state[b].first);
      EXPECT_TRUE(bitwise_equal(f.state[b].second.data(), ref_state[b].second->to_host().data(), ref.flat_size()))
          << ref_state[b].first;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ServersAndOptimizers, PsServerMatchesSerial,
                         ::testing::Combine(::testing::Values(1, 2, 3), ::testing::Values("adamw", "lamb", "sgd")));

// Two workers, bound 0: a worker one push ahead of a live slower one waits
// for it; when the slower one dies, the wait ends.
TEST(PsServer, BoundedStalenessHoldsTheFastWorker) {
  ParamStore initial;
  testing::make_store(initial);
  Cluster cluster(initial, 2, /*workers=*/2, /*steps=*/100, "sgd", /*max_staleness=*/0);
  ParamStore a_store, b_store;
  testing::make_store(a_store);
  testing::make_store(b_store);
  Client a(a_store, testing::client_options(cluster.ports, 0, 4));
  auto b = std::make_unique<Client>(b_store, testing::client_options(cluster.ports, 1, 4));

  ASSERT_TRUE(a.pull(a_store));
  ASSERT_TRUE(b->pull(b_store));
  ASSERT_TRUE(a.push(a_store));  // a: clock 1, b: clock 0
  auto a_pull = std::async(std::launch::async, [&] { return a.pull(a_store); });
  EXPECT_EQ(a_pull.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  ASSERT_TRUE(b->push(b_store));  // b: clock 1: a may go
  ASSERT_EQ(a_pull.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_TRUE(a_pull.get());
  EXPECT_EQ(b->last_staleness(), 1);  // b's params predate a's push

  ASSERT_TRUE(a.push(a_store));  // a: clock 2, b: clock 1
  auto a_pull2 = std::async(std::launch::async, [&] { return a.pull(a_store); });
  EXPECT_EQ(a_pull2.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  b.reset();  // b dies: no longer the slowest live worker
  ASSERT_EQ(a_pull2.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_TRUE(a_pull2.get());
}

// A rank that reconnects is told its clock and goes on from there; one that
// joins late starts at the slowest live worker's clock.
TEST(PsServer, RejoiningRankKeepsItsClock) {
  ParamStore initial;
  testing::make_store(initial);
  Cluster cluster(initial, 1, /*workers=*/2, /*steps=*/100, "sgd");
  ParamStore w;
  testing::make_store(w);
  {
    Client first(w, testing::client_options(cluster.ports, 1, 3));
    for (int k = 0; k < 3; ++k) ASSERT_TRUE(first.pull(w) && first.push(w));
  }
  Client again(w, testing::client_options(cluster.ports, 1, 3));
  EXPECT_EQ(again.initial_clock(), 3);
  EXPECT_EQ(again.server_step(), 3);
  for (int k = 0; k < 2; ++k) ASSERT_TRUE(again.pull(w) && again.push(w));
  // A rank that joins behind the slowest live worker starts at its clock.
  Client late(w, testing::client_options(cluster.ports, 0, 3));
  EXPECT_EQ(late.initial_clock(), 5);
}

TEST(PsServer, RefusesStrangers) {
  ParamStore initial;
  testing::make_store(initial);
  Cluster cluster(initial, 1, 1, 10);
  ParamStore w;
  testing::make_store(w);
  auto opts = testing::client_options(cluster.ports, 0, 2);
  opts.token = "wrong";
  try {
    Client c(w, opts);
    FAIL() << "accepted a wrong token";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("wrong job token"), std::string::npos) << e.what();
  }
  ParamStore other;  // another model
  other.declare("x", {3}, true);
  other.allocate();
  try {
    Client c(other, testing::client_options(cluster.ports, 0, 2));
    FAIL() << "accepted another model";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("model layout differs"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Client(w, testing::client_options(cluster.ports, 5, 2)), CommError);  // not a worker rank
}

TEST(PsClient, UnreachableServerIsNamed) {
  ParamStore w;
  testing::make_store(w);
  // A port that was free a moment ago.
  uint16_t port = 0;
  {
    auto fd = comm::tcp::listen_on("127.0.0.1", 0);
    port = comm::tcp::local_endpoint(fd.get()).port;
  }
  auto opts = testing::client_options({port}, 0, 2);
  opts.timeout = std::chrono::milliseconds(300);
  try {
    Client c(w, opts);
    FAIL() << "connected to nothing";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos) << e.what();
  }
}

TEST(PsClient, DeadServerIsAnErrorNotAHang) {
  ParamStore initial;
  testing::make_store(initial);
  auto cluster = std::make_unique<Cluster>(initial, 2, 1, 100, "sgd");
  ParamStore w;
  testing::make_store(w);
  Client c(w, testing::client_options(cluster->ports, 0, 3));
  ASSERT_TRUE(c.pull(w));
  cluster->servers[1]->shutdown();  // server 1 goes away
  cluster->results[1].wait();        // its connections are closed
  try {
    c.push(w);
    c.pull(w);
    FAIL() << "no error";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("parameter server 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace meshtrain::parallel::ps
