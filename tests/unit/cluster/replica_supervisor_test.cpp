// The supervisor's rules, with shell commands as replicas.
#include "meshtrain/cluster/replica_supervisor.hpp"

#include "meshtrain/core/error.hpp"

#include <gtest/gtest.h>

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "meshtrain/comm/flight/flight_recorder.hpp"

#include "meshtrain/core/error.hpp"

namespace meshtrain {
namespace {

using namespace std::chrono_literals;

Replica sh(const std::string& label, const std::string& script, ReplicaKind kind = ReplicaKind::Worker,
           std::vector<std::string> env = {}) {
  return {label, {"/bin/sh", "-c", script}, std::move(env), kind};
}

struct Outcome {
  SupervisorResult result;
  std::string output;
  double seconds = 0;
};

SupervisorOptions test_options(std::chrono::milliseconds drain = 2000ms) {
  SupervisorOptions options;
  options.name = "test";
  options.grace = 1000ms;
  options.drain = drain;
  return options;
}

Outcome supervise_with(const std::vector<Replica>& replicas, const SupervisorOptions& options) {
  std::FILE* out = std::tmpfile();
  const auto start = std::chrono::steady_clock::now();
  Outcome r;
  r.result = supervise(replicas, options, out);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::rewind(out);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, out)) > 0) r.output.append(buf, n);
  std::fclose(out);
  return r;
}

Outcome supervise_all(const std::vector<Replica>& replicas, std::chrono::milliseconds drain = 2000ms) {
  return supervise_with(replicas, test_options(drain));
}

// A scratch directory where the replicas leave traces ($D in their scripts).
class Scratch {
 public:
  Scratch() {
    std::string tmpl = std::filesystem::temp_directory_path() / "supervisor-test.XXXXXX";
    dir_ = mkdtemp(tmpl.data());
  }
  ~Scratch() { std::filesystem::remove_all(dir_); }
  std::string env() const { return "D=" + dir_; }
  std::vector<std::string> lines(const std::string& name) const {
    std::ifstream in(dir_ + "/" + name);
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }

 private:
  std::string dir_;
};

// Appends a line to $D/<name>; the script goes on when this is start number
// `n` or later (the shell's `starts` variable holds the count).
std::string count_start(const std::string& name, const std::string& line = "start") {
  return "echo " + line + " >> $D/" + name + "; starts=$(wc -l < $D/" + name + "); ";
}

// Waits until each named replica has counted a start: a replica that fails
// on purpose first lets the others start, or a loaded machine (ASan) may see
// them stopped before their first line and count one start too few.
std::string wait_for_starts(std::initializer_list<const char*> names) {
  std::string script;
  for (const char* name : names) script += std::string("while [ ! -s $D/") + name + " ]; do sleep 0.01; done; ";
  return script;
}

const ReplicaFailures* failures_of(const SupervisorResult& r, const std::string& label) {
  for (const auto& f : r.failures)
    if (f.label == label) return &f;
  return nullptr;
}

TEST(ReplicaSupervisor, PrefixesOutputAndPassesEnvironment) {
  setenv("RANK", "99", 1);  // an outer launcher's variable must not leak into the replicas
  Outcome r = supervise_all({sh("worker 0", "echo hello $GREETING rank=${RANK:-unset}; echo oops >&2",
                                ReplicaKind::Worker, {"GREETING=world"})});
  unsetenv("RANK");
  EXPECT_EQ(r.result.exit_code, 0);
  EXPECT_NE(r.output.find("[worker 0] hello world rank=unset\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[worker 0] oops\n"), std::string::npos) << r.output;
}

TEST(ReplicaSupervisor, AFailedWorkerStopsTheOthers) {
  Outcome r = supervise_all(
      {sh("worker 0", "sleep 30"), sh("server 0", "sleep 30", ReplicaKind::Service), sh("worker 1", "exit 3")});
  EXPECT_EQ(r.result.exit_code, 3);
  EXPECT_EQ(r.result.failed, 2);
  EXPECT_EQ(r.result.failure, "worker 1 exited with status 3");
  EXPECT_LT(r.seconds, 10);
}

TEST(ReplicaSupervisor, ADivergedWorkerIsNotRestarted) {
  SupervisorOptions options = test_options();
  options.max_restarts = 3;
  options.restart_backoff = 10ms;
  Outcome r = supervise_with({sh("worker 0", "sleep 30"), sh("worker 1", "exit 5")}, options);
  EXPECT_EQ(r.result.exit_code, kExitDiverged);
  EXPECT_EQ(r.result.restarts, 0);
  EXPECT_NE(r.output.find("worker 1 exited with status 5 (the training diverged: not restarted)"), std::string::npos)
      << r.output;
}

// A worker the scheduler signalled directly checkpoints and exits 4; the
// others agreed on the same step and follow without a signal from us (one
// would be their second, which exits at once). Nothing is restarted, and the
// services are stopped once the workers ended.
TEST(ReplicaSupervisor, APreemptedWorkerStopsTheJobWithoutARestart) {
  SupervisorOptions options = test_options();
  options.max_restarts = 3;
  options.stop_grace = 5000ms;
  Outcome r = supervise_with({sh("worker 0", "trap 'exit 143' TERM; sleep 0.8; exit 4"),
                              sh("worker 1", "sleep 0.3; exit 4"),
                              sh("server 0", "sleep 30", ReplicaKind::Service)},
                             options);
  EXPECT_EQ(r.result.exit_code, kExitPreempted) << r.output;
  EXPECT_EQ(r.result.restarts, 0);
  EXPECT_TRUE(r.result.failures.empty()) << r.output;
  EXPECT_NE(r.output.find("worker 1 was preempted and checkpointed; the others stop at the same step"),
            std::string::npos)
      << r.output;
  EXPECT_LT(r.seconds, 4) << "the server was stopped when the workers ended, not after the grace";
}

TEST(ReplicaSupervisor, APreemptionWithoutEveryCheckpointIsNotAPreemption) {
  SupervisorOptions options = test_options();
  options.stop_grace = 5000ms;
  Outcome r = supervise_with({sh("worker 0", "sleep 0.6; exit 1"), sh("worker 1", "sleep 0.2; exit 4")}, options);
  EXPECT_EQ(r.result.exit_code, 1) << r.output;
  EXPECT_NE(r.result.failure.find("preempted, but worker 0 exited with status 1"), std::string::npos)
      << r.result.failure;
}

TEST(ReplicaSupervisor, AFailedServiceStopsTheWorkers) {
  Outcome r = supervise_all({sh("worker 0", "sleep 30"), sh("reducer 0", "kill -9 $$", ReplicaKind::Service)});
  EXPECT_EQ(r.result.exit_code, 128 + 9);
  EXPECT_NE(r.result.failure.find("reducer 0 killed by signal 9"), std::string::npos);
  EXPECT_LT(r.seconds, 10);
}

TEST(ReplicaSupervisor, AnAuxiliaryFailureLetsTrainingFinishButFailsTheJob) {
  Outcome r =
      supervise_all({sh("worker 0", "sleep 1; echo done"), sh("evaluator 0", "exit 5", ReplicaKind::Auxiliary)});
  EXPECT_EQ(r.result.exit_code, 5);
  EXPECT_NE(r.output.find("[worker 0] done"), std::string::npos) << r.output;
}

TEST(ReplicaSupervisor, AuxiliariesGetTheDrainThenStop) {
  // The evaluator that finishes by itself within the drain is not stopped...
  Outcome quick =
      supervise_all({sh("worker 0", "true"), sh("evaluator 0", "sleep 0.5; echo final", ReplicaKind::Auxiliary)});
  EXPECT_EQ(quick.result.exit_code, 0);
  EXPECT_NE(quick.output.find("[evaluator 0] final"), std::string::npos) << quick.output;
  // ...one that would wait forever is stopped after it, and that is no failure.
  Outcome stuck = supervise_all({sh("worker 0", "true"), sh("evaluator 0", "sleep 30", ReplicaKind::Auxiliary)}, 500ms);
  EXPECT_EQ(stuck.result.exit_code, 0) << stuck.output;
  EXPECT_LT(stuck.seconds, 10);
  EXPECT_NE(stuck.output.find("stopping the rest"), std::string::npos) << stuck.output;
}

TEST(ReplicaSupervisor, AMissingProgramExits127) {
  Outcome r = supervise_all({{"worker 0", {"/nonexistent/program"}, {}, ReplicaKind::Worker}});
  EXPECT_EQ(r.result.exit_code, 127);
  EXPECT_NE(r.output.find("cannot run '/nonexistent/program'"), std::string::npos) << r.output;
}

TEST(ReplicaSupervisor, AFailureRestartsTheWholeGroup) {
  Scratch d;
  SupervisorOptions options = test_options(300ms);
  options.max_restarts = 2;
  options.restart_backoff = 100ms;
  // worker 0 fails on its first start; worker 1 and the server would run on
  // forever in the first group, and are restarted with it (worker 1 sees the
  // group's job id).
  Outcome r = supervise_with(
      {sh("worker 0",
          count_start("w0") + "[ $starts -ge 2 ] && exit 0; " + wait_for_starts({"w1", "s0"}) +
              "echo 'boom' >&2; exit 6",
          ReplicaKind::Worker, {d.env()}),
       sh("worker 1", count_start("w1", "$MESHTRAIN_JOB_ID") + "[ $starts -ge 2 ] && exit 0; sleep 30",
          ReplicaKind::Worker, {d.env(), "MESHTRAIN_JOB_ID=job"}),
       sh("server 0", count_start("s0") + "sleep 30", ReplicaKind::Service, {d.env()})},
      options);
  EXPECT_EQ(r.result.exit_code, 0) << r.output;
  EXPECT_EQ(r.result.restarts, 1);
  EXPECT_EQ(d.lines("w0").size(), 2u);
  EXPECT_EQ(d.lines("w1"), (std::vector<std::string>{"job", "job-r1"}));
  EXPECT_EQ(d.lines("s0").size(), 2u);
  EXPECT_NE(r.output.find("[test] worker 0 exited with status 6; stopping the others to restart the whole job"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("[test] restarting the whole job in 0.1 s (restart 1 of 2)"), std::string::npos) << r.output;
  // The others were stopped on purpose: only worker 0 failed.
  ASSERT_EQ(r.result.failures.size(), 1u);
  EXPECT_EQ(r.result.failures[0].label, "worker 0");
  EXPECT_EQ(r.result.failures[0].count, 1);
  EXPECT_LT(r.seconds, 10);
}

TEST(ReplicaSupervisor, AFailedServiceRestartsTheWholeGroup) {
  Scratch d;
  SupervisorOptions options = test_options(300ms);
  options.max_restarts = 1;
  options.restart_backoff = 0ms;
  Outcome r = supervise_with(
      {sh("worker 0", count_start("w0") + "[ $starts -ge 2 ] && exit 0; sleep 30", ReplicaKind::Worker, {d.env()}),
       sh("reducer 0", count_start("r0") + "[ $starts -ge 2 ] && sleep 30; " + wait_for_starts({"w0"}) + "kill -9 $$",
          ReplicaKind::Service, {d.env()})},
      options);
  EXPECT_EQ(r.result.exit_code, 0) << r.output;
  EXPECT_EQ(r.result.restarts, 1);
  EXPECT_EQ(d.lines("w0").size(), 2u);
  ASSERT_NE(failures_of(r.result, "reducer 0"), nullptr);
  EXPECT_EQ(failures_of(r.result, "reducer 0")->last, "reducer 0 killed by signal 9 (Killed)");
}

TEST(ReplicaSupervisor, AReplicaRestartedAloneRestartsTheGroupWhenItsOwnRestartsAreSpent) {
  // A parameter-server worker: restarted alone once; its second failure
  // restarts the group, whose fresh worker succeeds.
  Scratch d;
  SupervisorOptions options = test_options(300ms);
  options.max_restarts = 1;
  options.restart_backoff = 0ms;
  Replica ps_worker =
      sh("worker 1", count_start("w1") + "[ $starts -ge 3 ] && exit 0; " + wait_for_starts({"w0"}) + "exit 2",
         ReplicaKind::Worker, {d.env()});
  ps_worker.restarts = 1;
  Outcome r = supervise_with(
      {sh("worker 0", count_start("w0") + "[ $starts -ge 2 ] && exit 0; sleep 30", ReplicaKind::Worker, {d.env()}),
       ps_worker},
      options);
  EXPECT_EQ(r.result.exit_code, 0) << r.output;
  EXPECT_EQ(r.result.restarts, 1);
  EXPECT_EQ(d.lines("w1").size(), 3u);
  EXPECT_EQ(d.lines("w0").size(), 2u);
  EXPECT_NE(r.output.find("worker 1 exited with status 2; restarting it alone (1 of 1)"), std::string::npos)
      << r.output;
  ASSERT_NE(failures_of(r.result, "worker 1"), nullptr);
  EXPECT_EQ(failures_of(r.result, "worker 1")->count, 2);
}

TEST(ReplicaSupervisor, TheBackoffDoublesUpToItsCap) {
  Scratch d;
  SupervisorOptions options = test_options();
  options.max_restarts = 4;
  options.restart_backoff = 200ms;
  options.max_restart_backoff = 600ms;
  Outcome r = supervise_with({sh("worker 0", "date +%s.%N >> $D/t; exit 1", ReplicaKind::Worker, {d.env()})}, options);
  EXPECT_EQ(r.result.exit_code, 1);
  EXPECT_EQ(r.result.restarts, 4);
  for (const char* m : {"in 0.2 s (restart 1 of 4)", "in 0.4 s (restart 2 of 4)", "in 0.6 s (restart 3 of 4)",
                        "in 0.6 s (restart 4 of 4)"})
    EXPECT_NE(r.output.find(m), std::string::npos) << m << "\n" << r.output;
  // Between two starts: at least the backoff; at most it plus generous
  // slack for a loaded machine.
  const std::vector<std::string> t = d.lines("t");
  ASSERT_EQ(t.size(), 5u);
  const double backoff[] = {0.2, 0.4, 0.6, 0.6};
  for (size_t k = 0; k < 4; ++k) {
    const double gap = std::stod(t[k + 1]) - std::stod(t[k]);
    EXPECT_GE(gap, backoff[k] - 0.01) << "restart " << k + 1;
    EXPECT_LT(gap, backoff[k] + 2.0) << "restart " << k + 1;
  }
}

TEST(ReplicaSupervisor, AHungWorkerIsKilledAndTheGroupRestarted) {
  Scratch d;
  SupervisorOptions options = test_options(300ms);
  options.max_restarts = 1;
  options.restart_backoff = 0ms;
  options.heartbeat_timeout = 1000ms;
  // worker 0 beats once and hangs in its first group; worker 1 beats all
  // along and must not be taken for hung. Services get no heartbeat file.
  Outcome r = supervise_with(
      {sh("worker 0",
          count_start("w0") + "touch \"$MESHTRAIN_HEARTBEAT_FILE\"; [ $starts -ge 2 ] && exit 0; " +
              wait_for_starts({"w1"}) + "sleep 30",
          ReplicaKind::Worker, {d.env()}),
       sh("worker 1",
          count_start("w1") + "[ $starts -ge 2 ] && exit 0; while :; do touch \"$MESHTRAIN_HEARTBEAT_FILE\"; sleep 0.2; done",
          ReplicaKind::Worker, {d.env()}),
       sh("server 0", "echo hb=${MESHTRAIN_HEARTBEAT_FILE:-none}; sleep 30", ReplicaKind::Service)},
      options);
  EXPECT_EQ(r.result.exit_code, 0) << r.output;
  EXPECT_EQ(r.result.restarts, 1);
  EXPECT_EQ(d.lines("w0").size(), 2u);
  EXPECT_EQ(d.lines("w1").size(), 2u);
  EXPECT_NE(r.output.find("[test] worker 0 sent no heartbeat for"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[server 0] hb=none"), std::string::npos) << r.output;
  ASSERT_EQ(r.result.failures.size(), 1u) << r.output;
  EXPECT_EQ(r.result.failures[0].label, "worker 0");
  EXPECT_LT(r.seconds, 15);
}

TEST(ReplicaSupervisor, AHungJobLosesTheCulpritTheFlightRecorderNamesNotTheFirstStaleWorker) {
  // The rings (comm/flight/), written beforehand by stand-ins: rank 0 waits
  // in #3 of the data group; rank 1 finished #2 and is outside, forward of
  // step 2. Both workers then stop beating; worker 0 is the first found
  // stale, but rank 1 is the one the rings name.
  std::string tmpl = std::filesystem::temp_directory_path() / "supervisor-flight.XXXXXX";
  const std::string dir = mkdtemp(tmpl.data());
  for (int rank : {0, 1}) {
    const pid_t pid = fork();
    if (pid == 0) {
      if (!comm::flight::open_ring(dir + "/flight", rank, 2, "job", 64)) _exit(1);
      const std::vector<int> members{0, 1};
      const uint16_t g = comm::flight::register_group("data", members, rank);
      comm::flight::set_phase(1, comm::flight::Phase::Backward);
      for (uint64_t seq = 1; seq <= (rank == 0 ? 3u : 2u); ++seq) {
        const comm::flight::Entry e{.op = comm::flight::Op::AllReduce, .seq = seq, .bytes = 4096};
        const comm::flight::Slot slot = comm::flight::schedule(g, {&e, 1});
        comm::flight::started(slot);
        if (seq < 3) comm::flight::finished(slot, true);
      }
      if (rank == 1) comm::flight::set_phase(2, comm::flight::Phase::Forward);
      _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  SupervisorOptions options = test_options();
  options.heartbeat_timeout = 1000ms;
  options.flight_dir = dir;
  const std::string hang = "touch \"$MESHTRAIN_HEARTBEAT_FILE\"; sleep 30";
  // Worker 1 beats once more, 0.5 s later, so worker 0 is the first found
  // stale even when a loaded machine starts the two shells apart.
  const std::string later = "touch \"$MESHTRAIN_HEARTBEAT_FILE\"; sleep 0.5; " + hang;
  Outcome r = supervise_with({sh("worker 0", hang, ReplicaKind::Worker, {"RANK=0"}),
                              sh("worker 1", later, ReplicaKind::Worker, {"RANK=1"})},
                             options);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.result.exit_code, 128 + 9) << r.output;
  ASSERT_EQ(r.result.failures.size(), 1u) << r.output;
  EXPECT_EQ(r.result.failures[0].label, "worker 1");
  EXPECT_EQ(r.result.failure.rfind("worker 1 is the hang's culprit (worker 0 sent no heartbeat for", 0), 0u)
      << r.result.failure;
  const std::string culprit = "hang culprit: rank 1 never entered all_reduce of 4096 B #3 of group data [0, 1]";
  EXPECT_EQ(r.result.culprit.rfind(culprit, 0), 0u) << r.result.culprit;
  EXPECT_NE(r.result.culprit.find("outside any collective, in phase forward of step 2"), std::string::npos)
      << r.result.culprit;
  // The summary names it first.
  EXPECT_EQ(r.result.summary.rfind(r.result.culprit + "\nthe job failed: worker 1 is the hang's culprit", 0), 0u)
      << r.result.summary;
  EXPECT_LT(r.seconds, 10);
}

TEST(ReplicaSupervisor, AWorkerThatNeverBeatsIsHungAfterTheStartupAllowance) {
  SupervisorOptions options = test_options();
  options.heartbeat_timeout = 300ms;
  options.heartbeat_startup = 1500ms;
  Outcome r = supervise_with({sh("worker 0", "sleep 30")}, options);
  EXPECT_EQ(r.result.exit_code, 128 + 9);
  EXPECT_EQ(r.result.failure, "worker 0 sent no first heartbeat within 1.5 s of its start; killed it");
  EXPECT_GE(r.seconds, 1.4);
  EXPECT_LT(r.seconds, 10);
}

TEST(ReplicaSupervisor, WhenRestartsAreSpentTheSummaryNamesTheFailures) {
  Scratch d;
  SupervisorOptions options = test_options();
  options.max_restarts = 2;
  options.restart_backoff = 50ms;
  Outcome r = supervise_with(
      {sh("worker 0", "sleep 30"),
       sh("worker 1", "for i in 1 2 3 4 5 6; do echo line $i; done; echo 'fatal: disk on fire' >&2; exit 7")},
      options);
  EXPECT_EQ(r.result.exit_code, 7);
  EXPECT_EQ(r.result.failed, 1);
  EXPECT_EQ(r.result.failure, "worker 1 exited with status 7");
  EXPECT_EQ(r.result.restarts, 2);
  ASSERT_EQ(r.result.failures.size(), 1u) << r.output;  // worker 0 was stopped, it did not fail
  EXPECT_EQ(r.result.failures[0].count, 3);
  // The last 5 lines, stdout and stderr as they came.
  EXPECT_EQ(r.result.failures[0].last_lines,
            (std::vector<std::string>{"line 3", "line 4", "line 5", "line 6", "fatal: disk on fire"}));
  const std::string& s = r.result.summary;
  EXPECT_NE(s.find("the job failed: worker 1 exited with status 7 (after 2 of 2 restarts of the whole job)"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("worker 1 failed 3 times; last: worker 1 exited with status 7; its last lines:"), std::string::npos)
      << s;
  EXPECT_NE(s.find("    | fatal: disk on fire\n"), std::string::npos) << s;
  EXPECT_EQ(s.find("line 2"), std::string::npos) << s;
  EXPECT_NE(r.output.find("[test]     | fatal: disk on fire\n"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace meshtrain
