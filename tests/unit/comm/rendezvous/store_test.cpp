// The rendezvous store: set/get/wait, authentication, and the checks that
// fail a misconfigured job with one clear message instead of a hang.
#include <gtest/gtest.h>

#include <thread>

#include "meshtrain/comm/rendezvous/store_client.hpp"
#include "meshtrain/comm/transport/tcp/socket.hpp"
#include "../transport/tcp/tcp_test_util.hpp"

namespace meshtrain::comm::tcp_test {
namespace {

using rendezvous::StoreClient;
using rendezvous::StoreClientOptions;
using rendezvous::TcpStore;

StoreClientOptions client_options(const TcpStore& store, int rank, int world,
                                  std::chrono::milliseconds timeout = 2000ms) {
  return StoreClientOptions{{"127.0.0.1", store.port()}, kToken, kJob, rank, world, timeout};
}

#define EXPECT_COMM_ERROR(stmt, needle)                                                   \
  try {                                                                                   \
    stmt;                                                                                 \
    ADD_FAILURE() << "no CommError from " #stmt;                                          \
  } catch (const CommError& e) {                                                          \
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();         \
  }

TEST(TcpStore, SetGetWait) {
  TcpStore store(store_options(2));
  StoreClient a(client_options(store, 0, 2));
  StoreClient b(client_options(store, 1, 2));
  a.set("x", "1");
  EXPECT_EQ(b.get("x"), "1");
  a.set("x", "2");  // overwrite
  EXPECT_EQ(b.get("x"), "2");
  const std::string big(1 << 20, 'v');  // the largest value allowed
  b.set("big", big);
  EXPECT_EQ(a.get("big"), big);

  std::thread setter([&] {
    std::this_thread::sleep_for(50ms);
    a.set("late", "here");
  });
  EXPECT_EQ(b.get("late"), "here");  // waits until it is set
  setter.join();
  const std::vector<std::string> keys{"x", "big", "late"};
  b.wait(keys);
}

TEST(TcpStore, GetTimesOutNamingTheKey) {
  TcpStore store(store_options(1));
  StoreClient a(client_options(store, 0, 1, 300ms));
  const auto start = tcp::Clock::now();
  EXPECT_COMM_ERROR(a.get("tcp/addr/7"), "'tcp/addr/7'");
  EXPECT_LT(tcp::Clock::now() - start, 2s);
}

TEST(TcpStore, WrongTokenIsDroppedAndLoggedOthersUnaffected) {
  TcpStore store(store_options(2));
  StoreClientOptions bad = client_options(store, 1, 2);
  bad.token = "not-the-token";
  ::testing::internal::CaptureStderr();
  EXPECT_COMM_ERROR(StoreClient{bad}, "wrong token");
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("wrong token"), std::string::npos) << log;
  EXPECT_EQ(store.failure(), "");  // a stray client does not fail the job

  // The real ranks still rendezvous and connect their mesh.
  const auto errors = run_ranks_collect(store, 2, [](int rank, Transport& t) {
    char byte = 42;
    if (rank == 0) t.send(1, &byte, 1);
    if (rank == 1) t.recv(0, &byte, 1);
    EXPECT_EQ(byte, 42);
  });
  EXPECT_EQ(what_of(errors[0]) + what_of(errors[1]), "");
}

TEST(TcpStore, OversizedFrameIsDropped) {
  TcpStore store(store_options(1));
  StoreClient a(client_options(store, 0, 1));
  ::testing::internal::CaptureStderr();
  EXPECT_COMM_ERROR(a.set("k", std::string((1 << 20) + 1, 'v')), "closed the connection");
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("exceeds the limit"), std::string::npos);
  StoreClient b(client_options(store, 0, 1));  // the store still serves
  b.set("k", "ok");
  EXPECT_EQ(b.get("k"), "ok");
}

TEST(TcpStore, WorldSizeMismatchFailsTheJob) {
  TcpStore store(store_options(2));
  StoreClient a(client_options(store, 0, 2));
  std::thread waiter([&] { EXPECT_COMM_ERROR(a.get("never-set"), "says the world size is 3"); });
  std::this_thread::sleep_for(50ms);
  ::testing::internal::CaptureStderr();
  EXPECT_COMM_ERROR(StoreClient{client_options(store, 1, 3)}, "rank 1 (127.0.0.1:");
  waiter.join();  // the pending get was answered with the error, not left to time out
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("meshtrain tcp: error: rendezvous store: job failed"), std::string::npos);
  EXPECT_NE(store.failure().find("says the world size is 3 but the store (rank 0) says 2"), std::string::npos)
      << store.failure();
  EXPECT_COMM_ERROR(a.set("k", "v"), "world size");  // and so is every later request
}

TEST(TcpStore, DuplicateRankFailsTheJob) {
  TcpStore store(store_options(3));
  StoreClient first(client_options(store, 1, 3));
  ::testing::internal::CaptureStderr();
  EXPECT_COMM_ERROR(StoreClient{client_options(store, 1, 3)}, "rank 1 connected twice");
  ::testing::internal::GetCapturedStderr();
  EXPECT_NE(store.failure().find("connected twice"), std::string::npos);
  EXPECT_COMM_ERROR(first.get("x"), "connected twice");
}

TEST(TcpStore, RankOutsideWorldFailsTheJob) {
  TcpStore store(store_options(2));
  ::testing::internal::CaptureStderr();
  EXPECT_COMM_ERROR(StoreClient{client_options(store, 2, 2)}, "is outside [0, 2)");
  ::testing::internal::GetCapturedStderr();
  EXPECT_NE(store.failure().find("outside [0, 2)"), std::string::npos);
  // connect_tcp checks its own options before touching the network.
  EXPECT_COMM_ERROR(connect_tcp(rank_options(-1, 2, store.port())), "rank -1 is outside [0, 2)");
}

TEST(TcpStore, PortInUseIsAnErrorNotAHang) {
  tcp::Fd taken = tcp::listen_on("127.0.0.1", 0);
  const uint16_t port = tcp::local_endpoint(taken.get()).port;
  rendezvous::StoreOptions o = store_options(2);
  o.port = port;
  const std::string expected = "port " + std::to_string(port) + " on 127.0.0.1 is in use";
  EXPECT_COMM_ERROR(TcpStore{o}, expected);
  TcpOptions rank0 = rank_options(0, 2, port);
  rank0.host_store = true;  // connect_tcp hosting the store reports the same
  EXPECT_COMM_ERROR(connect_tcp(rank0), expected);
}

}  // namespace
}  // namespace meshtrain::comm::tcp_test
