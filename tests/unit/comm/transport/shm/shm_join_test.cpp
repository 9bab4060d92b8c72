// Joining a job's segment: foreign tokens and wrong world sizes are refused
// with clear messages, a rank cannot be claimed twice, and no /dev/shm file
// outlives a job, even one that crashed (the next job replaces it).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <csignal>

#include "shm_test_util.hpp"

namespace meshtrain::comm {
namespace {

using namespace shm_test;
using Clock = std::chrono::steady_clock;

TEST(ShmJoin, WrongTokenRefused) {
  const std::string job = unique_job_id("token");
  auto errors = run_threads(2, [&](int r) {
    ShmOptions o = options(job, r, 2, 300);
    if (r == 1) o.token = "another job's token";
    auto t = connect_shm(o);
  });
  EXPECT_NE(errors[1].find("rank 1: token does not match the job's"), std::string::npos) << errors[1];
  EXPECT_NE(errors[0].find("waiting for rank(s) 1 to join"), std::string::npos) << errors[0];
  EXPECT_FALSE(segment_exists(job));
}

TEST(ShmJoin, WrongWorldSizeAbortsTheJobQuickly) {
  const std::string job = unique_job_id("world");
  const auto t0 = Clock::now();
  // Rank 2 (the wrong one) comes a little later: a rank that arrives only
  // after the abort has removed the segment cannot learn why and waits for
  // its timeout instead (seen under ASan when rank 1's thread started late).
  auto errors = run_threads(3, [&](int r) {
    if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto t = connect_shm(options(job, r, r == 2 ? 4 : 3, 5000));
  });
  // Well before the 5 s timeout (with room for a loaded machine).
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 4.0);
  const std::string what = "rank 2 expected world size 4, job has 3";
  EXPECT_NE(errors[2].find(what), std::string::npos) << errors[2];
  EXPECT_NE(errors[0].find("job aborted by rank 2: " + what), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("job aborted by rank 2: " + what), std::string::npos) << errors[1];
  EXPECT_FALSE(segment_exists(job));
}

TEST(ShmJoin, RankClaimedTwice) {
  const std::string job = unique_job_id("twice");
  // World 3 with ranks {0, 1, 1}: rank 2 never comes, so nobody can finish
  // joining before the duplicate is noticed.
  auto errors = run_threads(3, [&](int r) { auto t = connect_shm(options(job, r == 2 ? 1 : r, 3, 2000)); });
  int claimed = 0;
  for (const std::string& e : errors) claimed += e.find("rank 1 was claimed twice") != std::string::npos;
  EXPECT_EQ(claimed, 3) << errors[0] << " | " << errors[1] << " | " << errors[2];
}

TEST(ShmJoin, BadOptionsRejected) {
  EXPECT_THROW(connect_shm(options("has/slash", 0, 1)), ConfigError);
  EXPECT_THROW(connect_shm(options("", 0, 1)), ConfigError);
  EXPECT_THROW(connect_shm(options("ok", 2, 2)), ConfigError);
  ShmOptions o = options("ok", 0, 1);
  o.slot_bytes = 1000;
  EXPECT_THROW(connect_shm(o), ConfigError);
}

TEST(ShmJoin, SegmentRemovedAfterJoinAndAfterFailedJoin) {
  const std::string job = unique_job_id("unlink");
  auto errors = run_threads(2, [&](int r) {
    auto t = connect_shm(options(job, r, 2));
    // Rank 0 unlinks the name before its connect returns.
    if (r == 0 && segment_exists(job)) throw std::runtime_error("segment still linked after join");
  });
  EXPECT_EQ(errors, std::vector<std::string>(2));
  EXPECT_FALSE(segment_exists(job));

  const std::string lonely = unique_job_id("lonely");
  EXPECT_THROW(connect_shm(options(lonely, 0, 2, 100)), CommError);
  EXPECT_FALSE(segment_exists(lonely));
}

TEST(ShmJoin, CrashedJobDoesNotBlockTheNext) {
  // A rank 0 killed before its peers joined leaves its segment behind; the
  // next job with the same id must replace it (and one with a new id is
  // unaffected anyway).
  const std::string job = unique_job_id("crashed");
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child == 0) {
    try {
      auto t = connect_shm(options(job, 0, 2, 10000));
    } catch (...) {
    }
    ::_exit(3);
  }
  while (!segment_exists(job)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // header written
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ASSERT_TRUE(segment_exists(job));

  auto errors = run_threads(2, [&](int r) {
    auto t = connect_shm(options(job, r, 2, 3000));
    uint64_t v = 42;
    if (r == 0) t->send(1, &v, sizeof(v));
    else t->recv(0, &v, sizeof(v));
    if (v != 42) throw std::runtime_error("wrong value");
  });
  EXPECT_EQ(errors, std::vector<std::string>(2));
  EXPECT_FALSE(segment_exists(job));
}

}  // namespace
}  // namespace meshtrain::comm
