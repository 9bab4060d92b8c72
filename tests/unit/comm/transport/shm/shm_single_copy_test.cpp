// Which path a message takes: single-copy (the receiver reads the sender's
// buffer in place) exactly when the exchange sends that peer at least the
// sender's single_copy_bytes, the receiver can read the sender's memory and
// both ranks allow it; the slots otherwise. Observable without
// timing: a message that fits the ring completes through the slots before
// the receiver takes it, while a single-copy send waits for the read.
#include <gtest/gtest.h>

#include <atomic>
#include <sched.h>
#include <unistd.h>

#include "meshtrain/comm/transport/shm/single_copy.hpp"
#include "shm_test_util.hpp"

namespace meshtrain::comm {
namespace {

using namespace shm_test;

constexpr size_t kMessage = 512u << 10;  // fits the default ring (1 MiB)

// Rank 0 sends kMessage to rank 1, which holds its receive back until the
// send has returned or 0.5 s have passed (a send through the slots takes
// well under a millisecond). True if the send had to wait for
// the receive (single-copy). Each rank's thresholds: sender_*, receiver_*
// (both of its values).
bool send_waited_for_receive(size_t sender_single_copy, size_t receiver_single_copy,
                             size_t sender_shared_cores = ~size_t(0) /* the value not in effect: never */) {
  const std::string job = unique_job_id("path");
  std::atomic<bool> sent{false};
  bool waited = false, intact = false;
  auto errors = run_threads(2, [&](int r) {
    ShmOptions o = options(job, r, 2);
    o.single_copy_bytes = o.single_copy_bytes_shared_cores = r == 0 ? sender_single_copy : receiver_single_copy;
    if (r == 0 && sender_shared_cores != ~size_t(0)) o.single_copy_bytes_shared_cores = sender_shared_cores;
    auto t = connect_shm(o);
    std::vector<uint8_t> buf(kMessage);
    if (r == 0) {
      fill(buf, 5);
      t->send(1, buf.data(), buf.size());
      sent = true;
      return;
    }
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    while (!sent && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    waited = !sent;
    t->recv(0, buf.data(), buf.size());
    intact = matches(buf, 5);
  });
  EXPECT_EQ(errors, std::vector<std::string>(2));
  EXPECT_TRUE(intact);
  return waited;
}

// Whether this process may read its own memory with process_vm_readv (a
// seccomp filter can forbid it): the transport must then fall back.
bool kernel_allows_single_copy() { return shm::can_read_peer(::getpid(), shm::probe_word_address()); }

TEST(ShmSingleCopy, LargeExchangeReadInPlaceWhereAllowed) {
  EXPECT_EQ(send_waited_for_receive(kMessage, kMessage), kernel_allows_single_copy());
}

TEST(ShmSingleCopy, SlotsBelowTheExchangeThreshold) { EXPECT_FALSE(send_waited_for_receive(kMessage + 1, 4096)); }

TEST(ShmSingleCopy, SlotsWhenTheSenderTurnsItOff) { EXPECT_FALSE(send_waited_for_receive(0, 4096)); }

TEST(ShmSingleCopy, SlotsWhenTheReceiverCannotRead) {
  // A receiver with single-copy off publishes that it cannot read: the
  // sender, which would use it, must take the slots.
  EXPECT_FALSE(send_waited_for_receive(4096, 0));
}

// More ranks than cores: the shared-cores threshold applies instead.
TEST(ShmSingleCopy, SharedCoresThresholdWhenRanksOutnumberCores) {
  cpu_set_t all;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(all), &all), 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &all)) {
      CPU_SET(cpu, &one);
      break;
    }
  }
  ASSERT_EQ(::sched_setaffinity(0, sizeof(one), &one), 0);  // the rank threads inherit it
  const bool waited = send_waited_for_receive(~size_t(0) >> 1, 4096, kMessage);
  ::sched_setaffinity(0, sizeof(all), &all);
  EXPECT_EQ(waited, kernel_allows_single_copy());
  // With a core per rank the other value holds: never.
  EXPECT_FALSE(send_waited_for_receive(~size_t(0) >> 1, 4096, kMessage));
}

TEST(ShmSingleCopy, MixedWithSlotMessagesInOrder) {
  // Descriptors and slot chunks interleave on one ring, several per
  // exchange, with a ring smaller than a descriptor's message: all arrive in
  // order, and a send whose descriptor is out does not hold up the next.
  const std::string job = unique_job_id("mixed");
  constexpr int kMessages = 60;
  auto size_of = [](int m) { return m % 3 == 0 ? size_t(70000 + m) : size_t(m * 37 % 9000); };  // bytes, includes 0
  std::vector<int> ok(2, 0);
  auto errors = run_threads(2, [&](int r) {
    ShmOptions o = options(job, r, 2);
    o.slot_bytes = 4096;
    o.slot_count = 4;
    // Exchanges with two large messages go single-copy, the others through the slots.
    o.single_copy_bytes = o.single_copy_bytes_shared_cores = 100000;
    auto t = connect_shm(o);
    std::vector<size_t> sizes(kMessages);
    for (int m = 0; m < kMessages; ++m) sizes[m] = size_of(m);
    ok[r] = send_in_batches(*t, r, sizes, 4);
  });
  EXPECT_EQ(errors, std::vector<std::string>(2));
  EXPECT_EQ(ok, std::vector<int>({1, 1}));
}

}  // namespace
}  // namespace meshtrain::comm
