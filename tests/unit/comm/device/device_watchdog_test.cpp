// DeviceWatchdog (comm/device/device_watchdog.hpp): work retired in order
// as it finishes, a timeout or an error reported once with the work named,
// the clock of each item starting when it becomes the oldest; a blocking
// call timed by one of its own (run_watched). The polls
// here are flags a test sets (what cudaEventQuery answers on a GPU).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "meshtrain/comm/device/device_watchdog.hpp"

namespace meshtrain::comm {
namespace {

using namespace std::chrono_literals;

// Waits up to 10 s for `condition`.
template <class Condition>
bool eventually(Condition&& condition) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

struct Log {
  std::mutex mutex;
  std::vector<std::string> entries;
  void add(const std::string& e) {
    std::lock_guard lock(mutex);
    entries.push_back(e);
  }
  std::vector<std::string> all() {
    std::lock_guard lock(mutex);
    return entries;
  }
};

// Work that finishes when its flag is set, logging how it was retired.
WatchedWork flagged(const std::string& name, std::shared_ptr<std::atomic<bool>> done, Log& log) {
  return {.what = name,
          .poll = [done] { return WatchedProgress{.done = done->load(), .error = {}}; },
          .finished = [name, &log](bool ok) { log.add(name + (ok ? " ok" : " dropped")); }};
}

TEST(DeviceWatchdog, RetiresWorkInTheOrderItWasIssuedAsItFinishes) {
  Log log, failures;
  DeviceWatchdog watchdog(30.0, [&](const std::string& why) { failures.add(why); });
  std::vector<std::shared_ptr<std::atomic<bool>>> done;
  for (int i = 0; i < 3; ++i) {
    done.push_back(std::make_shared<std::atomic<bool>>(false));
    watchdog.watch(flagged("op" + std::to_string(i), done.back(), log));
  }
  done[1]->store(true);  // finished, but behind op0 on the stream
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(watchdog.pending(), 3u);
  done[0]->store(true);
  done[2]->store(true);
  ASSERT_TRUE(eventually([&] { return watchdog.pending() == 0; }));
  EXPECT_EQ(log.all(), (std::vector<std::string>{"op0 ok", "op1 ok", "op2 ok"}));
  EXPECT_TRUE(failures.all().empty());
  EXPECT_FALSE(watchdog.failed());
}

TEST(DeviceWatchdog, WorkPastTheTimeoutIsReportedOnceNamedAndTheRestDropped) {
  Log log, failures;
  DeviceWatchdog watchdog(0.2, [&](const std::string& why) { failures.add(why); });
  auto never = std::make_shared<std::atomic<bool>>(false);
  watchdog.watch(flagged("NCCL communicator 'data': all_reduce #3 (4096 bytes)", never, log));
  watchdog.watch(flagged("next", std::make_shared<std::atomic<bool>>(true), log));
  ASSERT_TRUE(eventually([&] { return watchdog.failed(); }));
  ASSERT_TRUE(eventually([&] { return failures.all().size() == 1; }));
  EXPECT_EQ(failures.all()[0],
            "NCCL communicator 'data': all_reduce #3 (4096 bytes) did not finish within 0.2 s (parallel.timeout_s): a "
            "peer is dead, hung or never called it");
  EXPECT_EQ(log.all(), (std::vector<std::string>{"NCCL communicator 'data': all_reduce #3 (4096 bytes) dropped",
                                                 "next dropped"}));
  watchdog.watch(flagged("after", std::make_shared<std::atomic<bool>>(true), log));  // not polled any more
  EXPECT_EQ(log.all().back(), "after dropped");
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(failures.all().size(), 1u);
}

TEST(DeviceWatchdog, AnErrorThePollReportsFailsAtOnce) {
  Log failures;
  DeviceWatchdog watchdog(30.0, [&](const std::string& why) { failures.add(why); });
  watchdog.watch({.what = "send #1", .poll = [] { return WatchedProgress{.done = false, .error = "ncclRemoteError"}; }, .finished = {}});
  ASSERT_TRUE(eventually([&] { return failures.all().size() == 1; }));
  EXPECT_EQ(failures.all()[0], "send #1 failed: ncclRemoteError");
}

TEST(DeviceWatchdog, EachItemsClockStartsWhenItBecomesTheOldest) {
  Log log, failures;
  DeviceWatchdog watchdog(0.3, [&](const std::string& why) { failures.add(why); });
  std::this_thread::sleep_for(400ms);  // idle longer than the timeout: no item was waiting
  // Three items of 0.2 s each, one after another on the stream: 0.6 s in
  // all, each within 0.3 s of its turn.
  std::vector<std::shared_ptr<std::atomic<bool>>> done;
  for (int i = 0; i < 3; ++i) {
    done.push_back(std::make_shared<std::atomic<bool>>(false));
    watchdog.watch(flagged("op" + std::to_string(i), done.back(), log));
  }
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(150ms);
    done[size_t(i)]->store(true);
    ASSERT_TRUE(eventually([&] { return watchdog.pending() == size_t(2 - i); }));
  }
  EXPECT_TRUE(failures.all().empty());
  EXPECT_EQ(log.all().size(), 3u);
}

TEST(DeviceWatchdog, StopsWithWorkPendingAndRunsItsStartOnItsOwnThread) {
  Log log;
  std::atomic<bool> started_elsewhere{false};
  const std::thread::id caller = std::this_thread::get_id();
  {
    DeviceWatchdog watchdog(
        30.0, [](const std::string&) {}, [&] { started_elsewhere = std::this_thread::get_id() != caller; });
    watchdog.watch(flagged("pending", std::make_shared<std::atomic<bool>>(false), log));
  }
  EXPECT_TRUE(started_elsewhere.load());
  EXPECT_EQ(log.all(), (std::vector<std::string>{"pending dropped"}));
}

// At a clean shutdown the last operations have often finished on the
// device without the thread's next poll yet (it polls every interval):
// those are retired as done, not as failed, so the flight recorder does
// not show a clean run's last bucket failed; work still running is.
TEST(DeviceWatchdog, AtShutdownFinishedButUnpolledWorkIsRetiredDoneAndRunningWorkDropped) {
  Log log;
  auto finished = std::make_shared<std::atomic<bool>>(false);
  {
    DeviceWatchdog watchdog(30.0, [](const std::string&) {}, {}, 10s);  // no second poll within the test
    watchdog.watch(flagged("last bucket", finished, log));
    watchdog.watch(flagged("still running", std::make_shared<std::atomic<bool>>(false), log));
    std::this_thread::sleep_for(20ms);  // the thread polled "last bucket" once: not done
    finished->store(true);
  }
  EXPECT_EQ(log.all(), (std::vector<std::string>{"last bucket ok", "still running dropped"}));
}

// run_watched, as NCCL's blocking joins use it: a call that returns in time
// is not reported; one still running past the timeout is, once, named,
// while it goes on (here until it sees the report).
TEST(DeviceWatchdog, RunWatchedReportsOnlyACallStillRunningPastItsTimeout) {
  Log log;
  const auto report = [&log](const std::string& why) { log.add(why); };
  run_watched("a quick join", 30.0, report, [] {}, 1ms);
  EXPECT_TRUE(log.all().empty());
  bool saw_report = false;
  run_watched("ncclCommInitRank", 0.05, report, [&] { saw_report = eventually([&] { return !log.all().empty(); }); },
              1ms);
  EXPECT_TRUE(saw_report);
  ASSERT_EQ(log.all().size(), 1u);
  EXPECT_EQ(log.all()[0], "ncclCommInitRank did not finish within 0.05 s (parallel.timeout_s): a peer is dead, "
                          "hung or never called it");
}

}  // namespace
}  // namespace meshtrain::comm
