// Failures the shm transport must report as CommError naming the ranks
// involved: length mismatches, dead, closed and silent peers. Short timeouts
// keep these fast; "well under the timeout" checks use a long one.
#include <gtest/gtest.h>

#include <csignal>

#include "shm_test_util.hpp"

namespace meshtrain::comm {
namespace {

using namespace shm_test;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void expect_length_mismatch(size_t sent, size_t expected, size_t single_copy_bytes = ShmOptions{}.single_copy_bytes) {
  const std::string job = unique_job_id("mismatch");
  auto errors = run_threads(2, [&](int r) {
    ShmOptions o = options(job, r, 2, 5000);
    o.single_copy_bytes = o.single_copy_bytes_shared_cores = single_copy_bytes;
    auto t = connect_shm(o);
    std::vector<uint8_t> buf(std::max(sent, expected));
    if (r == 0) {
      t->send(1, buf.data(), sent);  // a single-copy send waits for a read that never comes
      t->recv(1, buf.data(), 1);      // fails: the job is aborted by rank 1
    } else {
      t->recv(0, buf.data(), expected);
    }
  });
  const std::string what = "length mismatch: rank 0 sent " + std::to_string(sent) + " bytes but rank 1 expected " +
                           std::to_string(expected) + " bytes";
  EXPECT_NE(errors[1].find(what), std::string::npos) << errors[1];
  EXPECT_NE(errors[0].find("job aborted by rank 1: " + what), std::string::npos) << errors[0];
}

TEST(ShmFailure, LengthMismatchNamesBothRanksAndLengths) { expect_length_mismatch(100, 200); }
TEST(ShmFailure, SingleCopyLengthMismatch) { expect_length_mismatch(1u << 20, 2u << 20, 4096); }

// Forks rank 1, which joins, starts `child_send` (if any) on a thread, and
// 30 ms later kills itself with SIGKILL; this process is rank 0 and runs
// `wait` against it.
void expect_death_reported(const std::function<void(Transport&)>& wait, const std::string& what,
                           const std::function<void(Transport&)>& child_send = nullptr) {
  const std::string job = unique_job_id("killed");
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child == 0) {
    try {
      auto t = connect_shm(options(job, 1, 2, 10000));
      if (child_send) std::thread([&] { child_send(*t); }).detach();
      std::this_thread::sleep_for(std::chrono::milliseconds(30));  // let rank 0 go to sleep
      ::raise(SIGKILL);
    } catch (...) {
    }
    ::_exit(3);
  }
  std::string error;
  double elapsed = 0;
  try {
    auto t = connect_shm(options(job, 0, 2, 10000));
    const auto t0 = Clock::now();
    try {
      wait(*t);
    } catch (const CommError& e) {
      error = e.what();
    }
    elapsed = seconds_since(t0);
  } catch (const std::exception& e) {
    error = std::string("connect: ") + e.what();
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  const std::string want = "rank 1 (pid " + std::to_string(child) + ") died while rank 0 waited for " + what;
  EXPECT_NE(error.find(want), std::string::npos) << error;
  EXPECT_LT(elapsed, 1.0);  // the timeout is 10 s
  EXPECT_FALSE(segment_exists(job));
}

TEST(ShmFailure, KilledSenderReportedQuickly) {
  expect_death_reported(
      [](Transport& t) {
        std::vector<uint8_t> buf(4096);
        t.recv(1, buf.data(), buf.size());
      },
      "its data (recv of 4096 bytes, 0 received)");
}

TEST(ShmFailure, SenderKilledBeforeItsSingleCopyMessageIsRead) {
  // Rank 1 publishes a 17 MiB send (single-copy by default where the kernel
  // allows, else the first 1 MiB in slots) and dies; rank 0 comes to read
  // it later.
  expect_death_reported(
      [](Transport& t) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        std::vector<uint8_t> buf(17u << 20);
        t.recv(1, buf.data(), buf.size());
      },
      "its data (recv of 17825792 bytes",
      [](Transport& t) {
        static std::vector<uint8_t> buf(17u << 20, 7);
        t.send(0, buf.data(), buf.size());
      });
}

TEST(ShmFailure, KilledReceiverReportedQuickly) {
  expect_death_reported(
      [](Transport& t) {
        std::vector<uint8_t> buf(17u << 20);  // more than the ring holds
        t.send(1, buf.data(), buf.size());
      },
      "it to take data (send of 17825792 bytes");
}

TEST(ShmFailure, ClosedPeerReported) {
  const std::string job = unique_job_id("closed");
  auto errors = run_threads(2, [&](int r) {
    auto t = connect_shm(options(job, r, 2, 5000));
    if (r == 0) {
      char byte;
      t->recv(1, &byte, 1);
    }
  });
  EXPECT_NE(errors[0].find("closed its transport while rank 0 waited for its data"),
            std::string::npos)
      << errors[0];
  EXPECT_EQ(errors[1], "");
}

TEST(ShmFailure, SilentPeerTimesOut) {
  const std::string job = unique_job_id("silent");
  auto codes = run_processes(2, [&](int r) {
    auto t = connect_shm(options(job, r, 2, 300));
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(800));  // alive, says nothing
      return true;
    }
    std::vector<uint8_t> buf(4096);
    const auto t0 = Clock::now();
    try {
      t->recv(1, buf.data(), buf.size());
    } catch (const CommError& e) {
      const double elapsed = seconds_since(t0);
      const std::string want =
          "rank 0 timed out after 0.3 s waiting for rank 1 and its data (recv of 4096 bytes";
      if (std::string(e.what()).find(want) == std::string::npos) {
        std::fprintf(stderr, "unexpected: %s\n", e.what());
        return false;
      }
      return elapsed > 0.28 && elapsed < 1.0;
    }
    return false;
  });
  EXPECT_EQ(codes, std::vector<int>({0, 0}));
}

TEST(ShmFailure, UnusableAfterError) {
  const std::string job = unique_job_id("broken");
  auto errors = run_threads(2, [&](int r) {
    auto t = connect_shm(options(job, r, 2, 200));
    if (r == 1) return;
    char byte = 0;
    try {
      t->recv(1, &byte, 1);
    } catch (const CommError&) {
    }
    t->send(1, &byte, 1);
  });
  EXPECT_NE(errors[0].find("unusable after an earlier error"), std::string::npos) << errors[0];
}

}  // namespace
}  // namespace meshtrain::comm
