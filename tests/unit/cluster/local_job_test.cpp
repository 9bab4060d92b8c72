// `meshtrain run`'s pools from a config, and the pool/config check.
#include "meshtrain/cluster/local_job.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "meshtrain/cluster/pool_check.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain {
namespace {

std::string env_value(const Replica& r, const std::string& name) {
  for (const auto& kv : r.env)
    if (kv.rfind(name + "=", 0) == 0) return kv.substr(name.size() + 1);
  return "";
}

LocalJobRequest request() { return {"/bin/meshtrain", "job.toml", {"--training.steps=5"}, 0}; }

TEST(LocalJob, ReductionServerJobHasReducersLast) {
  JobConfig c;
  c.parallel.data = DataParallelism::AllReduce;
  c.parallel.all_reduce = comm::AllReduceAlgorithm::ReductionServer;
  c.parallel.workers = 2;
  c.parallel.evaluators = 1;
  c.parallel.timeout_s = 7;
  std::vector<Replica> r = plan_local_job(c.parallel, request());
  ASSERT_EQ(r.size(), 5u);  // 2 workers, 2 reducers (0: as many as workers), 1 evaluator
  EXPECT_EQ(r[1].label, "worker 1");
  // Always --resume: a restarted group continues from the newest checkpoint.
  EXPECT_EQ(r[1].argv,
            (std::vector<std::string>{"/bin/meshtrain", "train", "job.toml", "--training.steps=5", "--resume"}));
  EXPECT_EQ(r[1].restarts, 0);  // a synchronous worker is restarted with the whole group
  EXPECT_EQ(env_value(r[1], "RANK"), "1");
  EXPECT_EQ(env_value(r[1], "WORLD_SIZE"), "4");
  EXPECT_EQ(r[3].label, "reducer 1");
  EXPECT_EQ(r[3].kind, ReplicaKind::Service);
  EXPECT_EQ(r[3].argv,
            (std::vector<std::string>{"/bin/meshtrain", "reducer", "--transport", "auto", "--timeout", "7"}));
  EXPECT_EQ(env_value(r[3], "RANK"), "3");
  EXPECT_EQ(env_value(r[3], "MESHTRAIN_NUM_SERVERS"), "2");
  EXPECT_EQ(r[4].label, "evaluator 0");
  EXPECT_EQ(r[4].kind, ReplicaKind::Auxiliary);
  EXPECT_EQ(r[4].argv[1], "evaluator");
  EXPECT_EQ(env_value(r[4], "RANK"), "");  // outside the world
}

TEST(LocalJob, ParameterServersGetAddresses) {
  JobConfig c;
  c.parallel.data = DataParallelism::ParameterServer;
  c.parallel.servers = 2;
  LocalJobRequest req = request();
  req.nproc = 3;
  std::vector<Replica> r = plan_local_job(c.parallel, req);
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(r[3].label, "server 0");
  EXPECT_EQ(r[3].argv[1], "ps-server");
  const std::string addrs = env_value(r[0], "MESHTRAIN_SERVER_ADDRS");
  EXPECT_EQ(addrs, env_value(r[4], "MESHTRAIN_SERVER_ADDRS"));
  EXPECT_EQ(std::count(addrs.begin(), addrs.end(), ','), 1);
  EXPECT_EQ(addrs.rfind("127.0.0.1:", 0), 0u);
  EXPECT_EQ(r[0].restarts, 3);  // parallel.max_restarts: a PS worker is restarted alone
  EXPECT_EQ(r[3].restarts, 0);  // a dead server restarts the whole group
}

TEST(LocalJob, SupervisionFollowsTheParallelSection) {
  JobConfig c;
  SupervisorOptions defaults = local_job_supervision(c.parallel);
  EXPECT_EQ(defaults.name, "run");
  EXPECT_EQ(defaults.max_restarts, 3);
  EXPECT_EQ(defaults.restart_backoff, std::chrono::milliseconds(1000));
  EXPECT_EQ(defaults.heartbeat_timeout, std::chrono::milliseconds(0));
  c.parallel.max_restarts = 5;
  c.parallel.restart_backoff_s = 0.25;
  c.parallel.heartbeat_timeout_s = 90;
  SupervisorOptions o = local_job_supervision(c.parallel);
  EXPECT_EQ(o.max_restarts, 5);
  EXPECT_EQ(o.restart_backoff, std::chrono::milliseconds(250));
  EXPECT_EQ(o.heartbeat_timeout, std::chrono::milliseconds(90000));
}

TEST(PoolCheck, RefusesPoolsTheConfigHasNoRoleFor) {
  ParallelSection none;
  EXPECT_NO_THROW(check_pools_fit_config({1, 0, 2}, none, ""));
  EXPECT_THROW(check_pools_fit_config({2, 0, 0}, none, ""), ConfigError);
  EXPECT_THROW(check_pools_fit_config({1, 1, 0}, none, ""), ConfigError);
  ParallelSection ring;
  ring.data = DataParallelism::AllReduce;
  EXPECT_NO_THROW(check_pools_fit_config({4, 0, 0}, ring, ""));
  EXPECT_THROW(check_pools_fit_config({4, 1, 0}, ring, ""), ConfigError);
  ParallelSection ps;
  ps.data = DataParallelism::ParameterServer;
  EXPECT_THROW(check_pools_fit_config({2, 0, 0}, ps, ""), ConfigError);
  try {
    check_pools_fit_config({1, 3, 0}, none, "spec: ");
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("spec: 3 server replicas"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace meshtrain
