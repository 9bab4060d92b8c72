// The TCP transport between threads on loopback: message sizes, rings,
// simultaneous large exchanges, reduce-on-receive and the error paths.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "tcp_test_util.hpp"

namespace meshtrain::comm::tcp_test {
namespace {

TEST(TcpTransport, WorldOfOneNeedsNoStore) {
  TcpOptions o = rank_options(0, 1, 1);  // nothing listens on port 1
  auto t = connect_tcp(o);
  EXPECT_EQ(t->size(), 1);
  EXPECT_EQ(t->name(), "tcp");
  t->exchange({}, {});
}

TEST(TcpTransport, SendRecvSizes) {
  const std::vector<size_t> sizes{0, 1, (size_t{1} << 20) + 3, size_t{17} << 20};
  run_ranks(2, [&](int rank, Transport& t) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      const auto sent = pattern(sizes[i], static_cast<int>(i));
      std::vector<unsigned char> got(sizes[i], 0);
      if (rank == 0) {
        t.send(1, sent.data(), sent.size());
        t.recv(1, got.data(), got.size());  // echoed back
      } else {
        t.recv(0, got.data(), got.size());
        t.send(0, got.data(), got.size());
      }
      ASSERT_EQ(got, sent) << sizes[i] << " bytes";
    }
  });
}

TEST(TcpTransport, SeveralMessagesToOnePeerKeepTheirOrder) {
  run_ranks(2, [](int rank, Transport& t) {
    const auto a = pattern(10, 1), b = pattern(0, 2), c = pattern(300000, 3);
    if (rank == 0) {
      const SendOp sends[] = {{1, a.data(), a.size()}, {1, b.data(), b.size()}, {1, c.data(), c.size()}};
      t.exchange(sends, {});
    } else {
      std::vector<unsigned char> x(a.size()), y(b.size()), z(c.size());
      const RecvOp recvs[] = {{0, x.data(), x.size()}, {0, y.data(), y.size()}, {0, z.data(), z.size()}};
      t.exchange({}, recvs);
      EXPECT_EQ(x, a);
      EXPECT_EQ(z, c);
    }
  });
}

void ring(int world) {
  run_ranks(world, [world](int rank, Transport& t) {
    const int next = (rank + 1) % world, prev = (rank + world - 1) % world;
    for (int round = 0; round < 3; ++round) {
      const size_t bytes = (size_t{1} << 20) + 3 + static_cast<size_t>(round);
      const auto mine = pattern(bytes, rank * 10 + round);
      std::vector<unsigned char> got(bytes);
      const SendOp send{next, mine.data(), bytes};
      const RecvOp recv{prev, got.data(), bytes};
      t.exchange({&send, 1}, {&recv, 1});
      ASSERT_EQ(got, pattern(bytes, prev * 10 + round)) << "rank " << rank << " round " << round;
    }
  });
}
TEST(TcpTransport, RingOfThree) { ring(3); }
TEST(TcpTransport, RingOfFive) { ring(5); }

// Both directions at once, each larger than the socket buffers: a transport
// that finished its send before starting its receive would deadlock here.
TEST(TcpTransport, SimultaneousLargeExchangeDoesNotDeadlock) {
  const size_t bytes = size_t{8} << 20;
  run_ranks(2, [&](int rank, Transport& t) {
    const int peer = 1 - rank;
    const auto mine = pattern(bytes, rank);
    std::vector<unsigned char> got(bytes);
    const SendOp send{peer, mine.data(), bytes};
    const RecvOp recv{peer, got.data(), bytes};
    t.exchange({&send, 1}, {&recv, 1});
    ASSERT_EQ(got, pattern(bytes, peer));
  });
}

template <class T>
void reduce_case(DataType dtype, ReduceOp op, size_t count) {
  run_ranks(3, [&](int rank, Transport& t) {
    auto values = [count](int r) {
      std::vector<T> v(count);
      for (size_t i = 0; i < count; ++i) v[i] = static_cast<T>(static_cast<long long>((i * 7 + r * 13) % 1000) - 500);
      return v;
    };
    const Reduction reduction{dtype, op};
    if (rank == 0) {
      std::vector<T> acc = values(0);
      const RecvOp recvs[] = {{1, acc.data(), count * sizeof(T), &reduction},
                              {2, acc.data(), count * sizeof(T), &reduction}};
      t.exchange({}, recvs);  // two reducing receives into one buffer, progressed together
      std::vector<T> expect = values(0);
      for (int r = 1; r < 3; ++r) reduce_into(expect.data(), values(r).data(), count * sizeof(T), reduction);
      ASSERT_EQ(acc, expect);
    } else {
      const auto mine = values(rank);
      t.send(0, mine.data(), count * sizeof(T));
    }
  });
}
// Counts past the staging buffer (4 MiB), so reads end mid-element and carry.
TEST(TcpTransport, ReduceOnReceiveF32Sum) { reduce_case<float>(DataType::F32, ReduceOp::Sum, 2'500'003); }
TEST(TcpTransport, ReduceOnReceiveI64Max) { reduce_case<int64_t>(DataType::I64, ReduceOp::Max, 1'300'001); }
TEST(TcpTransport, ReduceOnReceiveEmpty) { reduce_case<int64_t>(DataType::I64, ReduceOp::Sum, 0); }

TEST(TcpTransport, LengthMismatchNamesBothRanksAndLengths) {
  rendezvous::TcpStore store(store_options(2));
  const auto errors = run_ranks_collect(store, 2, [](int rank, Transport& t) {
    std::vector<unsigned char> buf(200);
    if (rank == 0) t.send(1, buf.data(), 100);
    if (rank == 1) t.recv(0, buf.data(), 200);
  });
  EXPECT_FALSE(errors[0]);
  EXPECT_EQ(what_of(errors[1]), "message length mismatch: rank 0 sent 100 bytes but rank 1 posted a receive of 200 bytes");
}

TEST(TcpTransport, SilentPeerTimesOutNamingIt) {
  rendezvous::TcpStore store(store_options(3));
  std::chrono::milliseconds took{};
  const auto errors = run_ranks_collect(store, 3, [&](int rank, Transport& t) {
    if (rank != 0) return;  // ranks 1 and 2 stay connected but never send
    std::vector<unsigned char> buf(64);
    const RecvOp recvs[] = {{1, buf.data(), 32}, {2, buf.data() + 32, 32}};
    const auto start = std::chrono::steady_clock::now();
    try {
      t.exchange({}, recvs);
    } catch (...) {
      took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
      throw;
    }
  }, [](int, TcpOptions& o) { o.transport.timeout = 300ms; });
  const std::string msg = what_of(errors[0]);
  EXPECT_NE(msg.find("rank 0: tcp exchange timed out after"), std::string::npos) << msg;
  EXPECT_NE(msg.find("receive from rank 1 (0 of 32 bytes)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("receive from rank 2 (0 of 32 bytes)"), std::string::npos) << msg;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 1000ms);
}

TEST(TcpTransport, ARankThatGivesUpTellsItsOtherPeersWhy) {
  // Rank 1 waits on rank 2 (which never sends) and times out; rank 0, which
  // waits on rank 1 with a long timeout, learns why at once (abort frame).
  rendezvous::TcpStore store(store_options(3));
  std::chrono::milliseconds took{};
  const auto errors = run_ranks_collect(store, 3, [&](int rank, Transport& t) {
    std::vector<unsigned char> buf(32);
    const auto start = std::chrono::steady_clock::now();
    try {
      if (rank == 0) t.recv(1, buf.data(), 32);
      if (rank == 1) t.recv(2, buf.data(), 32);
    } catch (...) {
      if (rank == 0)
        took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
      throw;
    }
  }, [](int rank, TcpOptions& o) { o.transport.timeout = rank == 1 ? 300ms : 20000ms; });
  EXPECT_FALSE(errors[2]);
  const std::string msg = what_of(errors[0]);
  EXPECT_EQ(msg.rfind("rank 1 gave up: rank 1: tcp exchange timed out after", 0), 0u) << msg;
  EXPECT_NE(msg.find("receive from rank 2 (0 of 32 bytes)"), std::string::npos) << msg;
  EXPECT_LT(took, 5000ms);
}

TEST(TcpTransport, InvalidOpsAreRejected) {
  run_ranks(2, [](int rank, Transport& t) {
    if (rank != 0) return;
    char b[8];
    EXPECT_THROW(t.send(0, b, 8), CommError);  // itself
    EXPECT_THROW(t.send(2, b, 8), CommError);  // outside the world
    const Reduction f64{DataType::F64, ReduceOp::Sum};
    const RecvOp odd{1, b, 7, &f64};
    EXPECT_THROW(t.exchange({}, {&odd, 1}), CommError);  // not whole elements
  });
}

}  // namespace
}  // namespace meshtrain::comm::tcp_test
