// CLUSTER_SPEC / TF_CONFIG -> a replica's rank, world and role.
#include "meshtrain/comm/bootstrap/cluster_spec_env.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

#include "meshtrain/comm/bootstrap/launch_env.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {
namespace {

const char* kCluster =
    R"("cluster": {"workerpool0": ["10.0.0.1:2222"], "workerpool1": ["10.0.0.2:2222", "10.0.0.3:2222"],
                   "workerpool2": ["10.0.0.4:2000", "10.0.0.5:2001"], "workerpool3": ["10.0.0.6:2222"]})";

LaunchEnv spec(const std::string& type, int index) {
  LaunchEnv e;
  apply_cluster_spec("CLUSTER_SPEC",
                     std::string("{") + kCluster + R"(, "environment": "cloud", "task": {"type": ")" + type +
                         R"(", "index": )" + std::to_string(index) + R"(, "trial": ""}, "job": {}})",
                     e);
  return e;
}

TEST(ClusterSpecEnv, PoolsMapToRanksInOrder) {
  LaunchEnv primary = spec("workerpool0", 0);
  EXPECT_EQ(primary.launcher, "vertex");
  EXPECT_EQ(primary.rank, 0);
  EXPECT_EQ(primary.role, "primary");
  EXPECT_EQ(primary.world_size, 5);  // 1 + 2 workers + 2 servers
  EXPECT_EQ(primary.num_servers, 2);
  EXPECT_EQ(primary.num_workers(), 3);
  EXPECT_EQ(primary.master_addr, "10.0.0.1");
  EXPECT_EQ(primary.master_port, 2222);
  EXPECT_EQ(primary.server_addrs, (std::vector<std::string>{"10.0.0.4:2000", "10.0.0.5:2001"}));

  LaunchEnv worker = spec("workerpool1", 1);
  EXPECT_EQ(worker.rank, 2);
  EXPECT_EQ(worker.role, "worker");
  EXPECT_EQ(worker.role_index, 1);

  LaunchEnv server = spec("workerpool2", 1);
  EXPECT_EQ(server.rank, 4);
  EXPECT_EQ(server.role, "server");
  EXPECT_EQ(server.role_index, 1);

  LaunchEnv evaluator = spec("workerpool3", 0);
  EXPECT_EQ(evaluator.rank, -1);
  EXPECT_EQ(evaluator.role, "evaluator");
  EXPECT_EQ(evaluator.world_size, 5);
}

TEST(ClusterSpecEnv, ReplicasOnOneHostAreLocal) {
  LaunchEnv e;
  apply_cluster_spec("CLUSTER_SPEC",
                     R"({"cluster": {"workerpool0": ["127.0.0.1:5000"], "workerpool1": ["127.0.0.1:5001"],
                                     "workerpool2": ["127.0.0.1:5002"]},
                         "task": {"type": "workerpool2", "index": 0}})",
                     e);
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.local_rank, 2);
  EXPECT_EQ(e.local_world_size, 3);
  LaunchEnv remote = spec("workerpool1", 1);
  EXPECT_EQ(remote.local_rank, 0);
  EXPECT_EQ(remote.local_world_size, 1);
}

TEST(ClusterSpecEnv, TfConfigNamesAndChieflessShape) {
  LaunchEnv e;
  apply_cluster_spec("TF_CONFIG",
                     R"({"cluster": {"chief": ["h0:1"], "worker": ["h1:1", "h2:1"], "ps": ["h3:7"]},
                         "environment": "cloud", "task": {"type": "ps", "index": 0}})",
                     e);
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.role, "server");
  EXPECT_EQ(e.world_size, 4);
  // Vertex AI's TF_CONFIG leaves evaluators out of the cluster.
  LaunchEnv ev;
  apply_cluster_spec("TF_CONFIG", R"({"cluster": {"chief": ["h0:1"]}, "task": {"type": "evaluator", "index": 0}})", ev);
  EXPECT_EQ(ev.role, "evaluator");
  EXPECT_EQ(ev.rank, -1);
  // Without a chief, worker 0 is the primary.
  LaunchEnv w;
  apply_cluster_spec("TF_CONFIG",
                     R"({"cluster": {"worker": ["h0:9", "h1:9"]}, "task": {"type": "worker", "index": 1}})", w);
  EXPECT_EQ(w.rank, 1);
  EXPECT_EQ(w.role, "worker");
  EXPECT_EQ(w.master_addr, "h0");
  LaunchEnv master;
  apply_cluster_spec("TF_CONFIG", R"({"cluster": {"master": ["h0:9"]}, "task": {"type": "master", "index": 0}})",
                     master);
  EXPECT_EQ(master.role, "primary");
}

void expect_error(const std::string& variable, const std::string& text, const std::string& fragment) {
  LaunchEnv e;
  try {
    apply_cluster_spec(variable, text, e);
    FAIL() << "accepted: " << text;
  } catch (const ConfigError& err) {
    const std::string what = err.what();
    EXPECT_NE(what.find(variable), std::string::npos) << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << what;
  }
}

TEST(ClusterSpecEnv, BadSpecsNameTheVariableAndTheProblem) {
  expect_error("CLUSTER_SPEC", "{not json", "malformed JSON");
  expect_error("CLUSTER_SPEC", R"({"task": {"type": "workerpool0"}})", "cluster");
  expect_error("CLUSTER_SPEC", R"({"cluster": {"workerpool0": ["a:1"]}})", "task");
  expect_error("CLUSTER_SPEC", R"({"cluster": {"workerpool0": ["a:1", "b:1"]}, "task": {"type": "workerpool0"}})",
               "exactly one replica");
  expect_error("CLUSTER_SPEC", R"({"cluster": {"workerpool1": ["a:1"]}, "task": {"type": "workerpool1"}})",
               "exactly one replica");
  expect_error("CLUSTER_SPEC",
               R"({"cluster": {"workerpool0": ["a:1"], "workerpool7": []}, "task": {"type": "workerpool0"}})",
               "unknown pool 'workerpool7'");
  expect_error("CLUSTER_SPEC", R"({"cluster": {"workerpool0": ["a:1"]}, "task": {"type": "chief", "index": 0}})",
               "unknown task type 'chief'");
  expect_error("TF_CONFIG", R"({"cluster": {"chief": ["a:1"]}, "task": {"type": "sidecar", "index": 0}})",
               "unknown task type 'sidecar'");
  expect_error("CLUSTER_SPEC", R"({"cluster": {"workerpool0": ["a:1"]}, "task": {"type": "workerpool1", "index": 0}})",
               "outside its pool");
  expect_error("CLUSTER_SPEC", R"({"cluster": {"workerpool0": ["a:1"]}, "task": {"type": "workerpool0", "index": -1}})",
               "non-negative");
  expect_error("CLUSTER_SPEC", R"({"cluster": {"workerpool0": ["nohost"]}, "task": {"type": "workerpool0"}})",
               "not host:port");
  expect_error("CLUSTER_SPEC", R"({"cluster": {"workerpool0": [7]}, "task": {"type": "workerpool0"}})",
               "list of host:port");
}

// read_launch_env: which variables win.
class EnvGuard {
 public:
  using Vars = std::vector<std::pair<std::string, std::string>>;
  explicit EnvGuard(Vars vars) : vars_(std::move(vars)) {
    for (const char* name :
         {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "MESHTRAIN_JOB_ID",
          "MESHTRAIN_JOB_TOKEN", "MESHTRAIN_NUM_SERVERS", "MESHTRAIN_NUM_REDUCERS", "MESHTRAIN_SERVER_ADDRS",
          "CLUSTER_SPEC", "TF_CONFIG", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "MESHTRAIN_SHM_SINGLE_COPY",
          "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_USE_AGENT_STORE",
          "MESHTRAIN_SOCKET_IFNAME"})
      unsetenv(name);
    for (const auto& [k, v] : vars_) setenv(k.c_str(), v.c_str(), 1);
  }
  ~EnvGuard() {
    for (const auto& kv : vars_) unsetenv(kv.first.c_str());
  }

 private:
  std::vector<std::pair<std::string, std::string>> vars_;
};

TEST(ReadLaunchEnv, ClusterSpecIsPreferredOverTfConfig) {
  EnvGuard env({{"CLUSTER_SPEC", R"({"cluster": {"workerpool0": ["127.0.0.1:4000"], "workerpool1": ["127.0.0.1:4001"]},
                                    "task": {"type": "workerpool1", "index": 0}})"},
                {"TF_CONFIG", "{broken"},
                {"MASTER_PORT", "9"},  // the spec alone says where peers are
                {"MESHTRAIN_JOB_TOKEN", "secret"}});
  LaunchEnv e = read_launch_env();
  EXPECT_EQ(e.launcher, "vertex");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.world_size, 2);
  EXPECT_EQ(e.master_port, 4000);
  EXPECT_EQ(e.token, "secret");
  EXPECT_FALSE(e.job_id.empty());
}

TEST(ReadLaunchEnv, TfConfigAloneAndTokenFallback) {
  EnvGuard env(EnvGuard::Vars{{"TF_CONFIG", R"({"cluster": {"chief": ["127.0.0.1:4000"], "ps": ["127.0.0.1:4002"]},
                                 "task": {"type": "ps", "index": 0}})"}});
  LaunchEnv e = read_launch_env();
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.role, "server");
  EXPECT_EQ(e.num_servers, 1);
  EXPECT_EQ(e.token, "meshtrain-job-" + e.job_id);  // a real Vertex AI job sets no token
}

TEST(ReadLaunchEnv, RankWinsOverClusterSpec) {
  EnvGuard env({{"RANK", "1"}, {"WORLD_SIZE", "3"}, {"CLUSTER_SPEC", "{broken"}});
  LaunchEnv e = read_launch_env();
  EXPECT_EQ(e.launcher, "env");  // RANK and WORLD_SIZE alone: no TORCHELASTIC_RUN_ID
  EXPECT_EQ(e.rank, 1);
}

TEST(ReadLaunchEnv, TorchrunAgentStoreAndRestarts) {
  EnvGuard env({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29400"}, {"TORCHELASTIC_RUN_ID", "job/7"},
                {"TORCHELASTIC_RESTART_COUNT", "2"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  LaunchEnv e = read_launch_env();
  EXPECT_EQ(e.launcher, "torchrun");
  EXPECT_EQ(e.store_host, StoreHost::TorchAgent);
  EXPECT_TRUE(e.local_known);
  EXPECT_EQ(e.job_id, "torchrun-job_7-p29400-a2");  // one per restart; shm-safe characters
  EXPECT_EQ(e.store_prefix, "/meshtrain/torchrun-job_7-p29400-a2/");
}

TEST(ReadLaunchEnv, TorchrunWithoutAgentStoreLetsRankZeroHostOne) {
  EnvGuard env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "2"}, {"TORCHELASTIC_RUN_ID", "x"},
                {"TORCHELASTIC_USE_AGENT_STORE", "False"}});
  EXPECT_EQ(read_launch_env().store_host, StoreHost::Rank0);
}

TEST(ReadLaunchEnv, KubeflowPyTorchJobLeavesTheLocalWorldToRendezvous) {
  EnvGuard env({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "job-master-0"}, {"MASTER_PORT", "23456"}});
  LaunchEnv e = read_launch_env();
  EXPECT_EQ(e.launcher, "env");
  EXPECT_FALSE(e.local_known);  // not "all 4 on this host"
  EXPECT_EQ(e.local_world_size, 1);
  EXPECT_EQ(e.store_host, StoreHost::Rank0);
  EXPECT_EQ(e.master_addr, "job-master-0");
}

TEST(ReadLaunchEnv, SocketInterfaceIsRead) {
  EnvGuard env({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MESHTRAIN_SOCKET_IFNAME", "eth1"}});
  EXPECT_EQ(read_launch_env().socket_ifname, "eth1");
}

TEST(ReadLaunchEnv, MalformedSpecIsAConfigErrorNamingIt) {
  EnvGuard env(EnvGuard::Vars{{"TF_CONFIG", "[1, 2"}});
  try {
    read_launch_env();
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("TF_CONFIG"), std::string::npos);
  }
}

TEST(ReadLaunchEnv, ShmSingleCopySwitch) {
  {
    EnvGuard env({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
    EXPECT_TRUE(read_launch_env().shm_single_copy);  // on unless turned off
  }
  {
    EnvGuard env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MESHTRAIN_SHM_SINGLE_COPY", "0"}});
    EXPECT_FALSE(read_launch_env().shm_single_copy);
  }
  EnvGuard env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MESHTRAIN_SHM_SINGLE_COPY", "off"}});
  try {
    read_launch_env();
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("MESHTRAIN_SHM_SINGLE_COPY='off' is not an integer in [0, 1]"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace meshtrain::comm
