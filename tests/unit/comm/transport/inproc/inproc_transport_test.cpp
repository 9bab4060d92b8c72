// The in-process transport on its own: per-pair order, reduce-on-receive,
// length checks, bounded queues, timeouts and departed peers.
#include <thread>

#include "meshtrain/comm/transport/inproc/inproc_transport.hpp"
#include "meshtrain/core/error.hpp"

#include <gtest/gtest.h>

namespace meshtrain::comm {
namespace {

using namespace std::chrono_literals;

std::vector<std::unique_ptr<Transport>> pair_of(std::chrono::milliseconds timeout = 5s, size_t capacity = 1 << 20) {
  InprocOptions options;
  options.transport.timeout = timeout;
  options.queue_capacity_bytes = capacity;
  return make_inproc_transports(2, options);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const CommError& e) {
    return e.what();
  }
  return "";
}

TEST(InprocTransportTest, DeliversInOrderAndReducesOnReceive) {
  auto t = pair_of();
  std::thread sender([&] {
    const float a[2] = {1, 2}, b[2] = {10, 20}, c[2] = {100, 200};
    const SendOp sends[3] = {{1, a, 8}, {1, b, 8}, {1, c, 8}};
    t[0]->exchange(sends, {});
  });
  float x[2] = {0, 0}, y[2] = {0.5f, 0.5f}, z[2] = {0, 0};
  const Reduction sum{DataType::F32, ReduceOp::Sum};
  const RecvOp recvs[3] = {{0, x, 8, nullptr}, {0, y, 8, &sum}, {0, z, 8, nullptr}};
  t[1]->exchange({}, recvs);
  sender.join();
  EXPECT_EQ(x[1], 2);
  EXPECT_EQ(y[0], 10.5f);
  EXPECT_EQ(z[1], 200);
}

TEST(InprocTransportTest, LengthMismatchNamesBothRanks) {
  auto t = pair_of();
  std::thread sender([&] {
    const int64_t v[5] = {};
    t[0]->send(1, v, sizeof v);
  });
  int64_t w[4];
  const std::string e = error_of([&] { t[1]->recv(0, w, sizeof w); });
  sender.join();
  EXPECT_NE(e.find("inproc rank 1"), std::string::npos) << e;
  EXPECT_NE(e.find("from rank 0 has 40 bytes but the receive expects 32"), std::string::npos) << e;
}

TEST(InprocTransportTest, SenderWaitsForRoomInABoundedQueue) {
  auto t = pair_of(5s, 1024);
  const auto start = std::chrono::steady_clock::now();
  std::thread receiver([&] {
    std::this_thread::sleep_for(50ms);
    std::vector<char> in(1024 * 8);
    std::vector<RecvOp> recvs;
    for (int i = 0; i < 8; ++i) recvs.push_back({0, in.data() + i * 1024, 1024, nullptr});
    t[1]->exchange({}, recvs);
    EXPECT_EQ(in[7 * 1024], 7);
  });
  std::vector<char> out(1024 * 8);
  std::vector<SendOp> sends;
  for (int i = 0; i < 8; ++i) out[size_t(i) * 1024] = char(i), sends.push_back({1, out.data() + i * 1024, 1024});
  t[0]->exchange(sends, {});
  EXPECT_GE(std::chrono::steady_clock::now() - start, 40ms) << "8 KiB cannot fit a 1 KiB queue";
  receiver.join();
}

TEST(InprocTransportTest, TimeoutNamesThePeer) {
  auto t = pair_of(100ms);
  char c;
  const std::string e = error_of([&] { t[0]->recv(1, &c, 1); });
  EXPECT_NE(e.find("timed out after 100 ms"), std::string::npos) << e;
  EXPECT_NE(e.find("receive from rank(s) 1"), std::string::npos) << e;
}

TEST(InprocTransportTest, DepartedPeerFailsAtOnce) {
  auto t = pair_of(10s);
  t[1].reset();
  char c = 0;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_NE(error_of([&] { t[0]->recv(1, &c, 1); }).find("rank 1, which closed its transport"), std::string::npos);
  EXPECT_NE(error_of([&] { t[0]->send(1, &c, 1); }).find("cannot send to rank 1"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
}

TEST(InprocTransportTest, RejectsSelfAndUnknownPeers) {
  auto t = pair_of();
  char c = 0;
  EXPECT_NE(error_of([&] { t[0]->send(0, &c, 1); }).find("invalid send peer 0"), std::string::npos);
  auto u = pair_of();
  EXPECT_NE(error_of([&] { u[1]->recv(2, &c, 1); }).find("invalid receive peer 2"), std::string::npos);
}

}  // namespace
}  // namespace meshtrain::comm
