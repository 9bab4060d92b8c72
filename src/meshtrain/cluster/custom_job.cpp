#include "meshtrain/cluster/custom_job.hpp"

#include <cctype>
#include <nlohmann/json.hpp>

#include "meshtrain/core/error.hpp"

namespace meshtrain {
namespace {

using nlohmann::json;

// The field under its camelCase name, else its snake_case one; null if neither.
const json* field(const json& object, const char* camel, const char* snake) {
  if (!object.is_object()) return nullptr;
  if (auto it = object.find(camel); it != object.end() && !it->is_null()) return &*it;
  if (auto it = object.find(snake); it != object.end() && !it->is_null()) return &*it;
  return nullptr;
}

std::vector<std::string> strings(const json* list, const std::string& where) {
  std::vector<std::string> out;
  if (!list) return out;
  if (!list->is_array()) throw ConfigError(where + " must be a list of strings");
  for (const auto& s : *list) {
    if (!s.is_string()) throw ConfigError(where + " must be a list of strings, found " + s.dump());
    out.push_back(s.get<std::string>());
  }
  return out;
}

int replica_count(const json& value, const std::string& where) {
  long long n = 0;
  if (value.is_number_integer()) {
    n = value.get<long long>();
  } else if (value.is_string()) {  // proto3 JSON writes int64 as a string
    const std::string text = value.get<std::string>();
    size_t used = 0;
    try {
      n = std::stoll(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (text.empty() || used != text.size()) throw ConfigError(where + " must be an integer, got " + value.dump());
  } else {
    throw ConfigError(where + " must be an integer, got " + value.dump());
  }
  if (n < 0) throw ConfigError(where + " must not be negative, got " + std::to_string(n));
  if (n > 4096) throw ConfigError(where + " of " + std::to_string(n) + " is more than 4096 local processes");
  return static_cast<int>(n);
}

PoolSpec parse_pool(const json& pool, const std::string& where) {
  PoolSpec spec;
  if (pool.is_null() || (pool.is_object() && pool.empty())) return spec;  // a skipped pool
  if (!pool.is_object()) throw ConfigError(where + " must be an object");
  if (field(pool, "pythonPackageSpec", "python_package_spec"))
    throw ConfigError(where + ".pythonPackageSpec is not supported: a local run has no package to install; give "
                      "containerSpec.command instead");
  const json* count = field(pool, "replicaCount", "replica_count");
  spec.replica_count = count ? replica_count(*count, where + ".replicaCount") : 1;
  const json* container = field(pool, "containerSpec", "container_spec");
  if (!container) {
    if (spec.replica_count > 0) throw ConfigError(where + " has replicas but no containerSpec to run");
    return spec;
  }
  spec.argv = strings(field(*container, "command", "command"), where + ".containerSpec.command");
  if (spec.argv.empty() && spec.replica_count > 0)
    throw ConfigError(where + ".containerSpec.command is empty: a local run has no image entrypoint to fall back on");
  for (auto& a : strings(field(*container, "args", "args"), where + ".containerSpec.args")) spec.argv.push_back(a);
  if (const json* env = field(*container, "env", "env")) {
    if (!env->is_array()) throw ConfigError(where + ".containerSpec.env must be a list of {name, value}");
    for (const auto& var : *env) {
      const json* name = field(var, "name", "name");
      const json* value = field(var, "value", "value");
      if (!name || !name->is_string() || name->get<std::string>().empty() || (value && !value->is_string()))
        throw ConfigError(where + ".containerSpec.env entries must be {\"name\": string, \"value\": string}, got " +
                          var.dump());
      spec.env.push_back(name->get<std::string>() + "=" + (value ? value->get<std::string>() : ""));
    }
  }
  return spec;
}

}  // namespace

CustomJobSpec parse_custom_job(const std::string& json_text, const std::string& origin) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::parse_error& e) {
    throw ConfigError(origin + ": malformed JSON (" + e.what() + ")");
  }
  if (!doc.is_object()) throw ConfigError(origin + ": a CustomJob must be a JSON object");
  CustomJobSpec spec;
  if (const json* name = field(doc, "displayName", "display_name"); name && name->is_string())
    spec.display_name = name->get<std::string>();
  const json* job = field(doc, "jobSpec", "job_spec");
  if (!job) job = &doc;
  const json* pools = field(*job, "workerPoolSpecs", "worker_pool_specs");
  if (!pools || !pools->is_array() || pools->empty())
    throw ConfigError(origin + ": needs jobSpec.workerPoolSpecs, a list of 1 to 4 worker pools");
  if (pools->size() > spec.pools.size())
    throw ConfigError(origin + ": workerPoolSpecs has " + std::to_string(pools->size()) +
                      " pools; there are 4 (primary, workers, servers, evaluators)");
  for (size_t p = 0; p < pools->size(); ++p)
    spec.pools[p] = parse_pool((*pools)[p], origin + ": workerPoolSpecs[" + std::to_string(p) + "]");
  if (spec.pools[0].replica_count != 1)
    throw ConfigError(origin + ": workerPoolSpecs[0] is the primary and must have replicaCount 1, got " +
                      std::to_string(spec.pools[0].replica_count));
  spec.job_json = job->dump();
  return spec;
}

}  // namespace meshtrain
