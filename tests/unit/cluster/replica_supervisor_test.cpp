// The supervisor's rules, with shell commands as replicas.
#include "meshtrain/cluster/replica_supervisor.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

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

Outcome supervise_all(const std::vector<Replica>& replicas, std::chrono::milliseconds drain = 2000ms) {
  SupervisorOptions options;
  options.name = "test";
  options.grace = 1000ms;
  options.drain = drain;
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

}  // namespace
}  // namespace meshtrain
