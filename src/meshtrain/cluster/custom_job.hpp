#pragma once
// A Vertex AI CustomJob, as `meshtrain submit` reads it: either the
// CustomJob resource ({"displayName": ..., "jobSpec": {...}}) or its
// CustomJobSpec alone ({"workerPoolSpecs": [...]}), in the REST API's
// camelCase or the client libraries' snake_case field names.
//
//   workerPoolSpecs[0]  the primary: replicaCount must be 1
//   workerPoolSpecs[1]  workers
//   workerPoolSpecs[2]  parameter servers or reducers
//   workerPoolSpecs[3]  evaluators
//
// Each pool: {"replicaCount": N, "machineSpec": {...},
//             "containerSpec": {"imageUri": ..., "command": [...], "args": [...],
//                               "env": [{"name": ..., "value": ...}]}}
// An empty pool ({}) has no replicas; a pool with a task but no
// replicaCount has one. replicaCount may be a number or, as proto3 JSON
// writes int64, a string of digits. machineSpec and imageUri are ignored:
// every replica runs here as a process. pythonPackageSpec is refused (there
// is no package to install the module from).
#include <array>
#include <string>
#include <vector>

namespace meshtrain {

struct PoolSpec {
  int replica_count = 0;
  std::vector<std::string> argv;  // containerSpec.command followed by containerSpec.args
  std::vector<std::string> env;   // "NAME=value" from containerSpec.env
};

struct CustomJobSpec {
  std::string display_name;
  std::array<PoolSpec, 4> pools;
  std::string job_json;  // the CustomJobSpec object, compact, for CLUSTER_SPEC's "job"
};

// Throws ConfigError starting with `origin` (the file) and naming the field.
CustomJobSpec parse_custom_job(const std::string& json_text, const std::string& origin);

}  // namespace meshtrain
