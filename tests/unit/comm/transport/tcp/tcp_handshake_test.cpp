// Mesh handshakes: a rank's data listener drops connections with a wrong
// token, garbage or an oversized frame, logs each, and still accepts the
// real rank afterwards.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <thread>

#include "meshtrain/comm/rendezvous/store_client.hpp"
#include "meshtrain/comm/transport/tcp/socket.hpp"
#include "tcp_test_util.hpp"

namespace meshtrain::comm::tcp_test {
namespace {

using rendezvous::FrameType;

// Connects to `to`, sends `bytes`, and reports whether the other side closed
// the connection within two seconds.
bool dropped_after_sending(const tcp::Endpoint& to, const std::string& bytes) {
  const auto deadline = tcp::Clock::now() + 2s;
  tcp::Fd fd = tcp::connect_with_retry(to, deadline, "rank 1");
  try {
    tcp::write_all(fd.get(), bytes, deadline, "rank 1");
  } catch (const CommError&) {
    return true;  // reset while writing: dropped
  }
  std::string in;
  return tcp::read_some(fd.get(), in, deadline, "rank 1") == tcp::ReadStatus::Eof && in.empty();
}

TEST(TcpHandshake, BadConnectionsAreDroppedAndTheListenerKeepsServing) {
  rendezvous::TcpStore store(store_options(2));
  std::string received;
  std::thread rank1([&] {
    auto t = connect_tcp(rank_options(1, 2, store.port()));
    received.resize(5);
    t->recv(0, received.data(), 5);
  });

  tcp::Endpoint rank1_addr;
  {  // Learn rank 1's data address the way rank 0 would, then hang up.
    rendezvous::StoreClient peek({{"127.0.0.1", store.port()}, kToken, kJob, 0, 2, 2000ms});
    rank1_addr = tcp::parse_endpoint(peek.get("tcp/addr/1"));
  }
  auto hello = [](const std::string& token, int rank, int world) {
    return rendezvous::encode_frame(FrameType::Hello, token, rendezvous::encode_hello_value({rank, world, kJob}));
  };
  std::string oversized = rendezvous::encode_frame(FrameType::Hello, "", "");
  oversized[5] = '\xff';  // key length 65535, far past the handshake's limit
  oversized[6] = '\xff';

  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(dropped_after_sending(rank1_addr, hello("wrong-token", 0, 2)));
  EXPECT_TRUE(dropped_after_sending(rank1_addr, "GET / HTTP/1.1\r\n\r\n"));
  EXPECT_TRUE(dropped_after_sending(rank1_addr, oversized));
  EXPECT_TRUE(dropped_after_sending(rank1_addr, hello(kToken, 0, 3)));  // world size mismatch
  EXPECT_TRUE(dropped_after_sending(rank1_addr, hello(kToken, 1, 2)));  // rank 1 is not below rank 1
  const std::string log = ::testing::internal::GetCapturedStderr();
  for (const char* why : {"wrong token", "bad magic", "exceeds the limit", "world size 3 is not 2",
                          "unexpected sender rank 1"})
    EXPECT_NE(log.find(why), std::string::npos) << why << "\n" << log;
  EXPECT_NE(log.find("meshtrain tcp: warning: rank 1 dropped a data connection from 127.0.0.1:"), std::string::npos) << log;

  auto t0 = connect_tcp(rank_options(0, 2, store.port()));  // the real rank 0 still gets in
  t0->send(1, "hello", 5);
  rank1.join();
  EXPECT_EQ(received, "hello");
}

}  // namespace
}  // namespace meshtrain::comm::tcp_test
