// The CustomJob parser and the environment submit derives from it.
#include "meshtrain/cluster/custom_job.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "meshtrain/cluster/submit_job.hpp"
#include "meshtrain/comm/bootstrap/cluster_spec_env.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain {
namespace {

const char* kJob = R"({
  "displayName": "tiny",
  "jobSpec": {"workerPoolSpecs": [
    {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
     "containerSpec": {"imageUri": "gcr.io/x/y", "command": ["meshtrain", "train"], "args": ["a.toml", "--x.y=1"],
                       "env": [{"name": "FOO", "value": "bar"}, {"name": "CLUSTER_SPEC", "value": "mine"}]}},
    {"replicaCount": "2", "containerSpec": {"command": ["meshtrain", "train", "a.toml"]}},
    {},
    {"replica_count": 1, "container_spec": {"command": ["meshtrain", "evaluator", "a.toml"]}}
  ]}})";

TEST(CustomJob, ParsesPoolsCommandsAndEnv) {
  CustomJobSpec job = parse_custom_job(kJob, "job.json");
  EXPECT_EQ(job.display_name, "tiny");
  EXPECT_EQ(job.pools[0].replica_count, 1);
  EXPECT_EQ(job.pools[0].argv, (std::vector<std::string>{"meshtrain", "train", "a.toml", "--x.y=1"}));
  EXPECT_EQ(job.pools[0].env, (std::vector<std::string>{"FOO=bar", "CLUSTER_SPEC=mine"}));
  EXPECT_EQ(job.pools[1].replica_count, 2);  // proto3 JSON's int64-as-string
  EXPECT_EQ(job.pools[2].replica_count, 0);  // a skipped pool
  EXPECT_EQ(job.pools[3].replica_count, 1);  // snake_case names
  EXPECT_NE(job.job_json.find("workerPoolSpecs"), std::string::npos);
}

TEST(CustomJob, AcceptsABareCustomJobSpec) {
  CustomJobSpec job =
      parse_custom_job(R"({"workerPoolSpecs": [{"containerSpec": {"command": ["true"]}}]})", "spec.json");
  EXPECT_EQ(job.pools[0].replica_count, 1);  // a pool with a task and no count has one replica
  EXPECT_EQ(job.pools[1].replica_count, 0);
}

void expect_error(const std::string& text, const std::string& fragment) {
  try {
    parse_custom_job(text, "job.json");
    FAIL() << "accepted: " << text;
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("job.json: ", 0), 0u) << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << what;
  }
}

TEST(CustomJob, RefusesSpecsItCannotRun) {
  const std::string cmd = R"("containerSpec": {"command": ["true"]})";
  expect_error("{", "malformed JSON");
  expect_error("[]", "JSON object");
  expect_error(R"({"jobSpec": {}})", "workerPoolSpecs");
  expect_error(R"({"workerPoolSpecs": [{"replicaCount": 2, )" + cmd + "}]}", "replicaCount 1, got 2");
  expect_error(R"({"workerPoolSpecs": [{"replicaCount": 0, )" + cmd + "}]}", "replicaCount 1, got 0");
  expect_error(R"({"workerPoolSpecs": [{}]})", "replicaCount 1, got 0");
  expect_error(R"({"workerPoolSpecs": [{)" + cmd + R"(}, {"replicaCount": -1, )" + cmd + "}]}",
               "workerPoolSpecs[1].replicaCount must not be negative");
  expect_error(R"({"workerPoolSpecs": [{)" + cmd + R"(}, {"replicaCount": "two", )" + cmd + "}]}", "integer");
  expect_error(R"({"workerPoolSpecs": [{}, {}, {}, {}, {}]})", "5 pools");
  expect_error(R"({"workerPoolSpecs": [{"replicaCount": 1}]})", "no containerSpec");
  expect_error(R"({"workerPoolSpecs": [{"containerSpec": {"imageUri": "x"}}]})", "command is empty");
  expect_error(R"({"workerPoolSpecs": [{"pythonPackageSpec": {"pythonModule": "t"}}]})", "pythonPackageSpec");
  expect_error(R"({"workerPoolSpecs": [{"containerSpec": {"command": ["x"], "env": [{"value": "v"}]}}]})",
               "env entries");
}

std::string env_value(const Replica& r, const std::string& name) {
  for (const auto& kv : r.env)
    if (kv.rfind(name + "=", 0) == 0) return kv.substr(name.size() + 1);
  return "";
}

TEST(SubmitPlan, EveryReplicaFindsTheSamePlaceFromEitherVariable) {
  CustomJobSpec job = parse_custom_job(kJob, "job.json");
  job.pools[2] = job.pools[1];  // two servers too
  std::vector<Replica> replicas = plan_submit(job, "/bin/meshtrain");
  ASSERT_EQ(replicas.size(), 6u);
  EXPECT_EQ(replicas[0].label, "primary");
  EXPECT_EQ(replicas[0].argv[0], "/bin/meshtrain");
  EXPECT_EQ(replicas[2].label, "worker 1");
  EXPECT_EQ(replicas[3].label, "server 0");
  EXPECT_EQ(replicas[3].kind, ReplicaKind::Service);
  EXPECT_EQ(replicas[5].label, "evaluator 0");
  EXPECT_EQ(replicas[5].kind, ReplicaKind::Auxiliary);
  EXPECT_EQ(env_value(replicas[0], "FOO"), "bar");
  const std::vector<std::string> roles = {"primary", "worker", "worker", "server", "server", "evaluator"};
  const std::vector<int> ranks = {0, 1, 2, 3, 4, -1};
  std::set<std::string> addresses;
  for (size_t i = 0; i < replicas.size(); ++i) {
    const std::string spec = env_value(replicas[i], "CLUSTER_SPEC");
    EXPECT_NE(spec, "mine");  // the spec's env cannot contradict submit's
    comm::LaunchEnv a, b;
    comm::apply_cluster_spec("CLUSTER_SPEC", spec, a);
    comm::apply_cluster_spec("TF_CONFIG", env_value(replicas[i], "TF_CONFIG"), b);
    EXPECT_EQ(a.rank, ranks[i]);
    EXPECT_EQ(a.role, roles[i]);
    EXPECT_EQ(b.rank, a.rank);
    EXPECT_EQ(b.role, a.role);
    EXPECT_EQ(a.world_size, 5);
    EXPECT_EQ(b.world_size, 5);
    EXPECT_EQ(a.server_addrs, b.server_addrs);
    EXPECT_EQ(a.master_port, b.master_port);
    EXPECT_EQ(a.local_world_size, i < 5 ? 5 : 1);  // all on this host
    const auto doc = nlohmann::json::parse(spec);
    EXPECT_EQ(doc["environment"], "cloud");
    EXPECT_EQ(doc["job"]["workerPoolSpecs"].size(), 4u);
    EXPECT_FALSE(nlohmann::json::parse(env_value(replicas[i], "TF_CONFIG"))["cluster"].contains("evaluator"));
    for (const auto& addr : doc["cluster"]["workerpool" + std::to_string(i < 1 ? 0 : i < 3 ? 1 : i < 5 ? 2 : 3)])
      addresses.insert(addr.get<std::string>());
    EXPECT_FALSE(env_value(replicas[i], "MESHTRAIN_JOB_TOKEN").empty());
  }
  EXPECT_EQ(addresses.size(), 6u);  // a distinct port per replica
}

}  // namespace
}  // namespace meshtrain
