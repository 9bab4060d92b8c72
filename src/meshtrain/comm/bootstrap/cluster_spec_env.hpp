#pragma once
// A replica's place in the job from the JSON that Vertex AI (and
// `meshtrain submit`) sets, without RANK or WORLD_SIZE:
//
//   CLUSTER_SPEC  {"cluster": {"workerpool0": ["host:port"], "workerpool1": [...],
//                              "workerpool2": [...], "workerpool3": [...]},
//                  "environment": "cloud",
//                  "task": {"type": "workerpool1", "index": 0, "trial": ""},
//                  "job": {...the CustomJobSpec...}}
//   TF_CONFIG     {"cluster": {"chief": [...], "worker": [...], "ps": [...]},
//                  "environment": "cloud", "task": {"type": "worker", "index": 0}, ...}
//
// Terms: pool 0 is the primary (exactly one replica), pool 1 the workers,
// pool 2 the servers (parameter servers or reducers), pool 3 the evaluators.
// TF_CONFIG names them chief (or master), worker, ps and evaluator; without a
// chief, worker 0 is the primary (TensorFlow's MultiWorkerMirroredStrategy
// shape). Evaluators are outside the world, and TF_CONFIG may omit them from
// its cluster, as Vertex AI does.
//
// The world is pool 0, pool 1, pool 2 in that order:
//   rank = 0 (pool 0), 1 + i (pool 1 index i), 1 + |pool 1| + j (pool 2 index j)
// and pool 0's address is the rendezvous address (MASTER_ADDR:MASTER_PORT).
// Replicas with the same host share a machine (LOCAL_RANK counts them).
#include <string>

#include "meshtrain/comm/bootstrap/launch_env.hpp"

namespace meshtrain::comm {

// Fills the world, role, rendezvous and server fields of `env` from one of
// the two variables' text. `variable` is "CLUSTER_SPEC" or "TF_CONFIG" (it
// picks the pool names and names the variable in errors). Evaluators get
// rank -1. Throws ConfigError naming the variable for malformed JSON, a
// missing field, an unknown pool or task type, a task index outside its pool,
// an address without a port, or a pool 0 without exactly one replica.
void apply_cluster_spec(const std::string& variable, const std::string& json_text, LaunchEnv& env);

}  // namespace meshtrain::comm
