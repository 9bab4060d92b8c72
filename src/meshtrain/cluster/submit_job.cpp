#include "meshtrain/cluster/submit_job.hpp"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "meshtrain/cluster/local_launcher.hpp"
#include "meshtrain/cluster/pool_check.hpp"
#include "meshtrain/train/config/config_schema.hpp"

namespace meshtrain {
namespace {

using nlohmann::json;

const char* const kPoolNames[] = {"workerpool0", "workerpool1", "workerpool2", "workerpool3"};
const char* const kTfNames[] = {"chief", "worker", "ps", "evaluator"};
const char* const kLabels[] = {"primary", "worker", "server", "evaluator"};
const ReplicaKind kKinds[] = {ReplicaKind::Worker, ReplicaKind::Worker, ReplicaKind::Service, ReplicaKind::Auxiliary};

bool is_override(const std::string& arg) {
  const size_t eq = arg.find('=');
  return arg.rfind("--", 0) == 0 && eq != std::string::npos && arg.find('.') < eq;
}

}  // namespace

std::vector<Replica> plan_submit(const CustomJobSpec& job, const std::string& self) {
  const json job_spec = json::parse(job.job_json);
  json cluster_spec = json::object(), tf_cluster = json::object();
  for (int p = 0; p < 4; ++p) {
    if (job.pools[p].replica_count == 0) continue;
    json addrs = json::array();
    for (int i = 0; i < job.pools[p].replica_count; ++i)
      addrs.push_back("127.0.0.1:" + std::to_string(pick_free_port("127.0.0.1")));
    cluster_spec[kPoolNames[p]] = addrs;
    if (p < 3) tf_cluster[kTfNames[p]] = addrs;
  }
  const std::string token = random_token();
  const std::string job_id = "submit-" + std::to_string(getpid()) + "-" + token.substr(0, 8);

  std::vector<Replica> replicas;
  for (int p = 0; p < 4; ++p) {
    const PoolSpec& pool = job.pools[p];
    for (int i = 0; i < pool.replica_count; ++i) {
      Replica r;
      r.label = p == 0 ? std::string("primary") : std::string(kLabels[p]) + " " + std::to_string(i);
      r.kind = kKinds[p];
      r.argv = pool.argv;
      if (!r.argv.empty() && r.argv[0] == "meshtrain") r.argv[0] = self;
      const json task = {{"type", kPoolNames[p]}, {"index", i}, {"trial", ""}};
      const json tf_task = {{"type", kTfNames[p]}, {"index", i}, {"trial", ""}};
      const json spec = {{"cluster", cluster_spec}, {"environment", "cloud"}, {"task", task}, {"job", job_spec}};
      const json tf = {{"cluster", tf_cluster}, {"environment", "cloud"}, {"task", tf_task}, {"job", job_spec}};
      r.env = {"CLUSTER_SPEC=" + spec.dump(), "TF_CONFIG=" + tf.dump(), "MESHTRAIN_JOB_ID=" + job_id,
               "MESHTRAIN_JOB_TOKEN=" + token};
      // The spec's own variables, except those that would contradict ours.
      for (const auto& kv : pool.env) {
        const std::string name = kv.substr(0, kv.find('='));
        bool ours = false;
        for (const auto& mine : r.env) ours = ours || mine.compare(0, name.size() + 1, name + "=") == 0;
        if (!ours) r.env.push_back(kv);
      }
      replicas.push_back(std::move(r));
    }
  }
  return replicas;
}

void check_submit_against_config(const CustomJobSpec& job, const std::string& origin) {
  const std::vector<std::string>& argv = job.pools[0].argv;
  if (argv.size() < 3 || argv[0] != "meshtrain" || argv[1] != "train") return;
  const PoolCounts pools{1 + job.pools[1].replica_count, job.pools[2].replica_count, job.pools[3].replica_count};
  std::vector<std::string> overrides;
  for (size_t k = 3; k < argv.size(); ++k)
    if (is_override(argv[k])) overrides.push_back(argv[k]);
  // The spec's pools are the job's workers whatever the file says (each
  // replica's `meshtrain train` takes them from CLUSTER_SPEC the same way).
  overrides.push_back("--parallel.workers=" + std::to_string(pools.workers));
  JobConfig config = load_job_config(argv[2], overrides);
  check_pools_fit_config(pools, config.parallel, origin + ": the primary's config " + argv[2] + ": ");
}

}  // namespace meshtrain
