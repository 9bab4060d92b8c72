// The flight recorder's ring: written by one process (a forked child: the
// recorder is one per process), read by another, after a normal exit, after
// the ring wrapped around, and after SIGKILL; the process probe; a ring held
// by a running process is not replaced; MESHTRAIN_FAULT's parsing.
#include "meshtrain/comm/flight/flight_recorder.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>

#include "meshtrain/comm/flight/fault_injection.hpp"
#include "meshtrain/comm/flight/flight_reader.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::flight {
namespace {

class FlightRecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = std::filesystem::temp_directory_path() / "flight-test.XXXXXX";
    dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs body in a child process; returns its pid (not waited for) when
  // wait is false, else waits and checks it exited with status 0.
  pid_t in_child(const std::function<int()>& body, bool wait = true) {
    const pid_t pid = fork();
    if (pid == 0) {
      int status = 1;
      try {
        status = body();
      } catch (...) {
        status = 2;
      }
      std::fflush(nullptr);
      if (status == 100) std::exit(0);  // a normal exit: static destructors close the ring
      _exit(status);
    }
    EXPECT_GT(pid, 0);
    if (wait) {
      int status = 0;
      EXPECT_EQ(waitpid(pid, &status, 0), pid);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
    }
    return pid;
  }

  std::string ring(int rank) const { return dir_ + "/worker-" + std::to_string(rank) + ".ring"; }

  std::string dir_;
};

TEST_F(FlightRecorderTest, RecordsAreReadBackByAnotherProcess) {
  const pid_t child = in_child([&] {
    if (!open_ring(dir_, 3, 4, "job-x", 64)) return 1;
    const std::vector<int> members{1, 3};
    const uint16_t g = register_group("data", members, 1);
    if (g != 0 || register_group("data", members, 1) != 0) return 3;  // the same group again: the same index
    set_phase(7, Phase::Backward);
    const Entry all_reduce{.op = Op::AllReduce, .algorithm = 2, .seq = 1, .bytes = 4096};
    const Slot a = schedule(g, {&all_reduce, 1});
    started(a);
    finished(a, true);
    const Entry p2p[2] = {{.op = Op::Send, .peer = 0, .seq = 1, .bytes = 64},
                          {.op = Op::Recv, .peer = 0, .seq = 1, .bytes = 32}};
    const Slot b = schedule(g, p2p);
    started(b);
    finished(b, false);
    set_phase(Phase::Optimizer);
    return 100;  // exit(): the ring is closed
  }, false);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;

  const RankRing r = read_ring(ring(3));
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.world, 4);
  EXPECT_EQ(r.pid, child);
  EXPECT_EQ(r.job_id, "job-x");
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  EXPECT_EQ(r.host, host);
  EXPECT_TRUE(r.closed);
  EXPECT_EQ(r.step, 7);
  EXPECT_EQ(r.phase, Phase::Optimizer);
  EXPECT_EQ(r.write_index, 3u);
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_EQ(r.groups[0].name, "data");
  EXPECT_EQ(r.groups[0].size, 2);
  EXPECT_EQ(r.groups[0].rank, 1);
  EXPECT_EQ(r.groups[0].members, (std::vector<int>{1, 3}));
  ASSERT_EQ(r.records.size(), 3u);
  const RingRecord& a = r.records[0];
  EXPECT_EQ(a.index, 0u);
  EXPECT_EQ(a.op, Op::AllReduce);
  EXPECT_EQ(a.seq, 1u);
  EXPECT_EQ(a.bytes, 4096u);
  EXPECT_EQ(a.algorithm, 2);
  EXPECT_EQ(a.group, 0);
  EXPECT_EQ(a.peer, -1);
  EXPECT_EQ(a.state, State::Completed);
  EXPECT_EQ(a.step, 7);
  EXPECT_EQ(a.phase, Phase::Backward);
  EXPECT_GT(a.scheduled_ns, 0);
  EXPECT_LE(a.scheduled_ns, a.started_ns);
  EXPECT_LE(a.started_ns, a.ended_ns);
  EXPECT_EQ(r.records[1].op, Op::Send);
  EXPECT_EQ(r.records[1].peer, 0);
  EXPECT_EQ(r.records[1].bytes, 64u);
  EXPECT_EQ(r.records[1].state, State::Failed);
  EXPECT_EQ(r.records[2].op, Op::Recv);
  EXPECT_EQ(r.records[2].state, State::Failed);
  EXPECT_EQ(probe_liveness(r), Liveness::Gone);
}

TEST_F(FlightRecorderTest, TheRingKeepsTheNewestRecordsWhenItWraps) {
  in_child([&] {
    if (!open_ring(dir_, 0, 2, "job", 16)) return 1;
    const std::vector<int> members{0, 1};
    const uint16_t g = register_group("all", members, 0);
    for (uint64_t i = 0; i < 40; ++i) {
      const Entry e{.op = Op::AllReduce, .seq = i + 1, .bytes = i};
      const Slot s = schedule(g, {&e, 1});
      started(s);
      if (i < 39) finished(s, true);
    }
    return 0;  // _exit: not closed
  });
  const RankRing r = read_ring(ring(0));
  EXPECT_FALSE(r.closed);
  EXPECT_EQ(r.write_index, 40u);
  ASSERT_EQ(r.records.size(), 16u);
  for (size_t i = 0; i < 16; ++i) {
    EXPECT_EQ(r.records[i].index, 24 + i);
    EXPECT_EQ(r.records[i].seq, 25 + i);
    EXPECT_EQ(r.records[i].bytes, 24 + i);
  }
  EXPECT_EQ(r.records.back().state, State::Started);
  EXPECT_EQ(r.records.front().state, State::Completed);
}

TEST_F(FlightRecorderTest, ARingIsReadableAfterItsProcessIsKilled) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = in_child([&] {
    if (!open_ring(dir_, 1, 2, "job", 64)) return 1;
    const std::vector<int> members{0, 1};
    const uint16_t g = register_group("tensor", members, 1);
    set_phase(5, Phase::Forward);
    for (uint64_t i = 0; i < 5; ++i) {
      const Entry e{.op = Op::AllGather, .seq = i + 1, .bytes = 128};
      const Slot s = schedule(g, {&e, 1});
      started(s);
      if (i < 4) finished(s, true);  // the last one never finishes
    }
    (void)!write(ready[1], "x", 1);
    for (;;) pause();
  }, false);
  char x;
  ASSERT_EQ(read(ready[0], &x, 1), 1);
  {
    // Alive: the ring reads while it runs, and while it is stopped.
    const RankRing live = read_ring(ring(1));
    EXPECT_EQ(probe_liveness(live), Liveness::Running);
    kill(child, SIGSTOP);
    siginfo_t info{};
    waitid(P_PID, id_t(child), &info, WSTOPPED | WNOWAIT);
    EXPECT_EQ(probe_liveness(live), Liveness::Stopped);
  }
  kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  close(ready[0]);
  close(ready[1]);
  const RankRing r = read_ring(ring(1));
  EXPECT_FALSE(r.closed);
  EXPECT_EQ(r.step, 5);
  EXPECT_EQ(r.phase, Phase::Forward);
  ASSERT_EQ(r.records.size(), 5u);
  EXPECT_EQ(r.records[3].state, State::Completed);
  EXPECT_EQ(r.records[4].state, State::Started);
  EXPECT_EQ(r.records[4].op, Op::AllGather);
  EXPECT_EQ(probe_liveness(r), Liveness::Gone);
  RankRing elsewhere = r;
  elsewhere.host = "another-host";
  EXPECT_EQ(probe_liveness(elsewhere), Liveness::Unknown);
}

TEST_F(FlightRecorderTest, ARingHeldByARunningProcessIsNotReplaced) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t holder = in_child([&] {
    if (!open_ring(dir_, 0, 2, "first", 64)) return 1;
    (void)!write(ready[1], "x", 1);
    for (;;) pause();
  }, false);
  char x;
  ASSERT_EQ(read(ready[0], &x, 1), 1);
  in_child([&] { return open_ring(dir_, 0, 2, "second", 64) ? 1 : 0; });  // refused
  EXPECT_EQ(read_ring(ring(0)).job_id, "first");
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  in_child([&] { return open_ring(dir_, 0, 2, "third", 64) ? 0 : 1; });  // the holder is gone: replaced
  EXPECT_EQ(read_ring(ring(0)).job_id, "third");
  close(ready[0]);
  close(ready[1]);
}

TEST_F(FlightRecorderTest, ReadRingsTakesTheNewestJobsRingsInRankOrder) {
  in_child([&] { return open_ring(dir_ + "/flight", 2, 3, "old", 16) ? 0 : 1; });
  usleep(2000);
  in_child([&] { return open_ring(dir_ + "/flight", 1, 2, "new", 16) ? 0 : 1; });
  in_child([&] { return open_ring(dir_ + "/flight", 0, 2, "new", 16) ? 0 : 1; });
  std::vector<std::string> notes;
  const std::vector<RankRing> rings = read_rings(dir_, &notes);  // the run directory: its flight/
  ASSERT_EQ(rings.size(), 2u);
  EXPECT_EQ(rings[0].rank, 0);
  EXPECT_EQ(rings[1].rank, 1);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("worker-2.ring"), std::string::npos) << notes[0];
  EXPECT_THROW(read_rings(dir_ + "/flight/none"), Error);
  std::filesystem::create_directories(dir_ + "/empty");
  EXPECT_THROW(read_rings(dir_ + "/empty"), Error);
}

TEST_F(FlightRecorderTest, AFileThatIsNotARingIsRefused) {
  const std::string path = dir_ + "/worker-0.ring";
  std::FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("not a ring", f);
  std::fclose(f);
  EXPECT_THROW(read_ring(path), Error);
}

TEST_F(FlightRecorderTest, WithoutARingNothingIsRecorded) {
  in_child([&] {
    if (recording()) return 1;
    const Entry e{.op = Op::Barrier, .seq = 1};
    if (schedule(kNoGroup, {&e, 1})) return 2;
    const std::vector<int> members{0};
    return register_group("data", members, 0) == kNoGroup ? 0 : 3;
  });
}

TEST(FaultInjectionTest, TheKnobIsParsedAndFiresOnceAtItsStep) {
  const pid_t pid = fork();
  if (pid == 0) {
    int bad = 0;
    setenv("MESHTRAIN_FAULT", "size_mismatch:rank=1:step=3:group=data", 1);
    arm_fault_from_environment(0);  // another rank's
    bad += fault_armed() ? 1 : 0;
    arm_fault_from_environment(1);
    bad += fault_armed() ? 0 : 2;
    set_phase(2, Phase::Forward);
    bad += take_fault("data", Op::AllReduce) == Fault::None ? 0 : 4;
    set_phase(3, Phase::Forward);
    bad += take_fault("tensor", Op::AllReduce) == Fault::None ? 0 : 8;  // another group
    bad += take_fault("data", Op::Send) == Fault::None ? 0 : 16;        // not a collective
    bad += take_fault("data", Op::AllGather) == Fault::SizeMismatch ? 0 : 32;
    bad += take_fault("data", Op::AllGather) == Fault::None ? 0 : 64;  // once
    for (const char* wrong : {"skip:rank=1:step=3", "skip_collective:rank=1", "skip_collective:rank=1:step=3:op=send",
                              "other_collective:rank=1:step=3:when=now", "size_mismatch:rank=1:step"}) {
      setenv("MESHTRAIN_FAULT", wrong, 1);
      try {
        arm_fault_from_environment(1);
        bad |= 128;
      } catch (const ConfigError&) {
      }
    }
    _exit(bad);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace meshtrain::comm::flight
