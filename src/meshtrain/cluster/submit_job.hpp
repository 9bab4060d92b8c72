#pragma once
// `meshtrain submit`: every replica of a CustomJob (custom_job.hpp) as a
// process on this host, each told its place the way Vertex AI tells it:
//
//   CLUSTER_SPEC  {"cluster": {"workerpool0": ["127.0.0.1:P0"], "workerpool1": [...], ...},
//                  "environment": "cloud", "task": {"type": "workerpool1", "index": 0, "trial": ""},
//                  "job": {...the CustomJobSpec...}}
//   TF_CONFIG     {"cluster": {"chief": [...], "worker": [...], "ps": [...]},
//                  "environment": "cloud", "task": {"type": "worker", "index": 0, "trial": ""},
//                  "job": {...}}
//
// (TF_CONFIG's cluster leaves out the evaluators, as Vertex AI's does; an
// evaluator's task type is "evaluator".) Every replica gets its own free
// loopback port; pool 0's is the rendezvous port. submit also sets
// MESHTRAIN_JOB_ID and MESHTRAIN_JOB_TOKEN, which a real Vertex AI job would
// not. A command whose first word is `meshtrain` runs this executable.
#include <string>
#include <vector>

#include "meshtrain/cluster/custom_job.hpp"
#include "meshtrain/cluster/replica_supervisor.hpp"

namespace meshtrain {

// The replicas, pool by pool: labels "primary", "worker i", "server j",
// "evaluator k". Pools 0 and 1 are workers, pool 2 services, pool 3 auxiliary.
std::vector<Replica> plan_submit(const CustomJobSpec& job, const std::string& self);

// When the primary runs `meshtrain train CONFIG [--section.key=value ...]`,
// checks the pools against that config (pool_check.hpp) so that a spec the
// job cannot use fails before anything starts. Other commands are not checked.
void check_submit_against_config(const CustomJobSpec& job, const std::string& origin);

}  // namespace meshtrain
