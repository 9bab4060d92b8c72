// Point-to-point correctness of the shm transport: message sizes around the
// slot boundaries, ordering, and exchanges in rings whose messages exceed the
// ring capacity (which would deadlock without round-robin progress).
#include <gtest/gtest.h>

#include "shm_test_util.hpp"

namespace meshtrain::comm {
namespace {

using namespace shm_test;

const std::vector<size_t> kSizes = {0, 1, 4095, (1u << 20) + 3, 17u << 20};  // bytes

// Rank 0 sends every size to rank 1, which echoes it back; both check.
bool echo_sizes(const std::string& job, int rank) {
  auto t = connect_shm(options(job, rank, 2));
  for (size_t i = 0; i < kSizes.size(); ++i) {
    std::vector<uint8_t> buf(kSizes[i]);
    if (rank == 0) {
      fill(buf, i);
      t->send(1, buf.data(), buf.size());
      std::fill(buf.begin(), buf.end(), 0);
      t->recv(1, buf.data(), buf.size());
    } else {
      t->recv(0, buf.data(), buf.size());
      t->send(0, buf.data(), buf.size());
    }
    if (!matches(buf, i)) return false;
  }
  return true;
}

TEST(ShmSendRecv, SizesThreads) {
  const std::string job = unique_job_id("sizes-t");
  std::vector<int> ok(2, 0);
  auto errors = run_threads(2, [&](int r) { ok[r] = echo_sizes(job, r); });
  EXPECT_EQ(errors, std::vector<std::string>(2));
  EXPECT_EQ(ok, std::vector<int>({1, 1}));
  EXPECT_FALSE(segment_exists(job));
}

TEST(ShmSendRecv, SizesProcesses) {
  const std::string job = unique_job_id("sizes-p");
  EXPECT_EQ(run_processes(2, [&](int r) { return echo_sizes(job, r); }), std::vector<int>({0, 0}));
  EXPECT_FALSE(segment_exists(job));
}

TEST(ShmSendRecv, ManyMessagesInOrder) {
  // Small slots so longer messages span several; several sends to one peer
  // in one exchange must arrive in the order posted.
  const std::string job = unique_job_id("order");
  constexpr int kMessages = 600;
  auto size_of = [](int m) { return size_t(m * 37 % 9000); };  // bytes, includes 0
  std::vector<int> ok(2, 0);
  auto errors = run_threads(2, [&](int r) {
    ShmOptions o = options(job, r, 2);
    o.slot_bytes = 4096;
    o.slot_count = 4;
    auto t = connect_shm(o);
    std::vector<size_t> sizes(kMessages);
    for (int m = 0; m < kMessages; ++m) sizes[m] = size_of(m);
    ok[r] = send_in_batches(*t, r, sizes, 3);  // three messages per exchange
  });
  EXPECT_EQ(errors, std::vector<std::string>(2));
  EXPECT_EQ(ok, std::vector<int>({1, 1}));
}

// Every rank sends `bytes` to both neighbours and receives from both in one
// exchange, with rings far smaller than a message.
bool ring_exchange(const std::string& job, int rank, int world, size_t bytes) {
  ShmOptions o = options(job, rank, world);
  o.slot_bytes = 16384;
  o.slot_count = 2;
  auto t = connect_shm(o);
  const int right = (rank + 1) % world, left = (rank + world - 1) % world;
  std::vector<uint8_t> to_right(bytes), to_left(bytes), from_left(bytes), from_right(bytes);
  for (int round = 0; round < 2; ++round) {
    fill(to_right, 100 * rank + 2 * round);
    fill(to_left, 100 * rank + 2 * round + 1);
    SendOp sends[] = {{right, to_right.data(), bytes}, {left, to_left.data(), bytes}};
    RecvOp recvs[] = {{left, from_left.data(), bytes, nullptr},
                      {right, from_right.data(), bytes, nullptr}};
    t->exchange(sends, recvs);
    if (!matches(from_left, 100 * left + 2 * round) ||
        !matches(from_right, 100 * right + 2 * round + 1)) {
      return false;
    }
  }
  return true;
}

TEST(ShmSendRecv, RingOf3Threads) {
  const std::string job = unique_job_id("ring3");
  std::vector<int> ok(3, 0);
  auto errors = run_threads(3, [&](int r) { ok[r] = ring_exchange(job, r, 3, (3u << 20) + 5); });
  EXPECT_EQ(errors, std::vector<std::string>(3));
  EXPECT_EQ(ok, std::vector<int>(3, 1));
}

TEST(ShmSendRecv, RingOf5Processes) {
  const std::string job = unique_job_id("ring5");
  auto codes = run_processes(5, [&](int r) { return ring_exchange(job, r, 5, (1u << 20) + 7); });
  EXPECT_EQ(codes, std::vector<int>(5, 0));
}

TEST(ShmSendRecv, RingOf5Threads) {
  const std::string job = unique_job_id("ring5t");
  std::vector<int> ok(5, 0);
  auto errors = run_threads(5, [&](int r) { ok[r] = ring_exchange(job, r, 5, 300000); });
  EXPECT_EQ(errors, std::vector<std::string>(5));
  EXPECT_EQ(ok, std::vector<int>(5, 1));
}

TEST(ShmSendRecv, WorldOfOneAndBadPeers) {
  auto t = connect_shm(options(unique_job_id("solo"), 0, 1));
  t->exchange({}, {});
  EXPECT_EQ(t->name(), "shm");
  char byte = 0;
  EXPECT_THROW(t->send(0, &byte, 1), CommError);
  EXPECT_THROW(t->recv(1, &byte, 1), CommError);
}

}  // namespace
}  // namespace meshtrain::comm
