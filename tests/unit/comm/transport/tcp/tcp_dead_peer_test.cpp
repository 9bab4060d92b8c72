// A real process as the peer: SIGKILL it mid-exchange, and the surviving
// rank must report that rank by number long before the timeout.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "tcp_test_util.hpp"

namespace meshtrain::comm::tcp_test {
namespace {

TEST(TcpDeadPeer, KilledProcessIsNamedWellWithinTheTimeout) {
  int port_pipe[2];
  ASSERT_EQ(pipe(port_pipe), 0);
  // Fork before this process starts any thread (the store's included).
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // rank 1: connect, then never send
    close(port_pipe[1]);
    uint16_t port = 0;
    if (read(port_pipe[0], &port, sizeof port) != sizeof port) _exit(2);
    try {
      auto t = connect_tcp(rank_options(1, 2, port));
      for (;;) pause();
    } catch (...) {
      _exit(3);
    }
  }
  close(port_pipe[0]);
  rendezvous::TcpStore store(store_options(2));
  const uint16_t port = store.port();
  ASSERT_EQ(write(port_pipe[1], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  close(port_pipe[1]);

  auto t = connect_tcp(rank_options(0, 2, port, 5000ms));
  std::thread killer([child] {
    std::this_thread::sleep_for(100ms);
    kill(child, SIGKILL);
  });
  std::vector<unsigned char> buf(1 << 20);
  const auto start = std::chrono::steady_clock::now();
  std::string msg;
  try {
    t->recv(1, buf.data(), buf.size());
  } catch (const CommError& e) {
    msg = e.what();
  }
  const auto took = std::chrono::steady_clock::now() - start;
  killer.join();
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_NE(msg.find("rank 1 closed the connection (died?)"), std::string::npos) << msg;
  EXPECT_LT(took, 1000ms);  // the timeout is 5 s
  // The transport stays failed rather than reading a half-received stream.
  EXPECT_THROW(t->recv(1, buf.data(), 1), CommError);
}

}  // namespace
}  // namespace meshtrain::comm::tcp_test
