#include "meshtrain/comm/bootstrap/cluster_spec_env.hpp"

#include <array>
#include <cctype>
#include <nlohmann/json.hpp>
#include <vector>

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {
namespace {

using nlohmann::json;
constexpr int kPools = 4;  // primary, workers, servers, evaluators

// The names each variable gives pools 0..3; TF_CONFIG also says "master"
// for the primary (AI Platform's older name).
int pool_of(const std::string& variable, const std::string& name) {
  static const std::array<const char*, kPools> kClusterSpec = {"workerpool0", "workerpool1", "workerpool2",
                                                               "workerpool3"};
  static const std::array<const char*, kPools> kTfConfig = {"chief", "worker", "ps", "evaluator"};
  const auto& names = variable == "TF_CONFIG" ? kTfConfig : kClusterSpec;
  for (int p = 0; p < kPools; ++p)
    if (name == names[p]) return p;
  if (variable == "TF_CONFIG" && name == "master") return 0;
  return -1;
}

std::string expected_names(const std::string& variable) {
  return variable == "TF_CONFIG" ? "chief, master, worker, ps or evaluator"
                                 : "workerpool0, workerpool1, workerpool2 or workerpool3";
}

struct HostPort {
  std::string host;
  int port = 0;
};

// "host:port" or "[v6addr]:port".
HostPort split_address(const std::string& variable, const std::string& addr) {
  const size_t colon = addr.rfind(':');
  HostPort hp;
  if (colon != std::string::npos && colon > 0) {
    hp.host = addr.substr(0, colon);
    if (hp.host.size() > 2 && hp.host.front() == '[' && hp.host.back() == ']')
      hp.host = hp.host.substr(1, hp.host.size() - 2);
    const std::string port = addr.substr(colon + 1);
    bool digits = !port.empty() && port.size() <= 5;
    for (char c : port) digits = digits && std::isdigit(static_cast<unsigned char>(c));
    if (digits) hp.port = std::stoi(port);
  }
  if (hp.host.empty() || hp.port < 1 || hp.port > 65535)
    throw ConfigError("environment: " + variable + ": address '" + addr + "' is not host:port");
  return hp;
}

// A name usable in shared-memory segment names: [A-Za-z0-9.-] only.
std::string sanitize(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '-';
  return s;
}

// Each pool's "host:port" entries, pools 0..3.
using PoolAddresses = std::array<std::vector<std::string>, kPools>;

// This replica's task: its pool and index there, and the type as written.
struct SpecTask {
  std::string type;
  int pool = -1;
  int index = 0;
};

// The variable's JSON, with the "cluster" and "task" objects it must have.
json parse_spec(const std::string& where, const std::string& json_text) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::parse_error& err) {
    throw ConfigError(where + "malformed JSON (" + err.what() + ")");
  }
  if (!doc.is_object() || !doc.contains("cluster") || !doc["cluster"].is_object())
    throw ConfigError(where + "needs a \"cluster\" object mapping pools to lists of host:port");
  if (!doc.contains("task") || !doc["task"].is_object())
    throw ConfigError(where + "needs a \"task\" object with \"type\" and \"index\"");
  return doc;
}

PoolAddresses read_pools(const std::string& where, const std::string& variable, const json& cluster) {
  PoolAddresses pools;
  for (const auto& [name, entries] : cluster.items()) {
    const int p = pool_of(variable, name);
    if (p < 0)
      throw ConfigError(where + "unknown pool '" + name + "' in \"cluster\" (expected " + expected_names(variable) +
                        ")");
    if (!entries.is_array()) throw ConfigError(where + "cluster." + name + " must be a list of host:port strings");
    for (const auto& entry : entries) {
      if (!entry.is_string()) throw ConfigError(where + "cluster." + name + " must be a list of host:port strings");
      pools[p].push_back(entry.get<std::string>());
    }
  }
  return pools;
}

SpecTask read_task(const std::string& where, const std::string& variable, const json& task) {
  if (!task.contains("type") || !task["type"].is_string())
    throw ConfigError(where + "task.type must be a string (one of " + expected_names(variable) + ")");
  SpecTask t;
  t.type = task["type"].get<std::string>();
  t.pool = pool_of(variable, t.type);
  if (t.pool < 0)
    throw ConfigError(where + "unknown task type '" + t.type + "' (expected " + expected_names(variable) + ")");
  const json index_field = task.value("index", json(0));
  if (!index_field.is_number_integer() || index_field.get<long long>() < 0)
    throw ConfigError(where + "task.index must be a non-negative integer, got " + index_field.dump());
  t.index = static_cast<int>(index_field.get<long long>());
  return t;
}

// TensorFlow's chief-less shape: worker 0 is the primary.
void promote_first_worker(const std::string& variable, PoolAddresses& pools, SpecTask& task) {
  if (variable != "TF_CONFIG" || !pools[0].empty() || pools[1].empty()) return;
  pools[0].push_back(pools[1].front());
  pools[1].erase(pools[1].begin());
  if (task.pool == 1) {
    if (task.index == 0)
      task.pool = 0;
    else
      --task.index;
  }
}

void check_pools(const std::string& where, const std::string& variable, const PoolAddresses& pools,
                 const SpecTask& task) {
  if (pools[0].size() != 1)
    throw ConfigError(where + "the primary pool (" + (variable == "TF_CONFIG" ? "chief" : "workerpool0") +
                      ") must list exactly one replica, got " + std::to_string(pools[0].size()));
  // Evaluators may be left out of the cluster (Vertex AI's TF_CONFIG does).
  if (task.pool != 3 || !pools[3].empty())
    if (task.index >= static_cast<int>(pools[task.pool].size()))
      throw ConfigError(where + "task " + task.type + " index " + std::to_string(task.index) +
                        " is outside its pool of " + std::to_string(pools[task.pool].size()));
}

// The world (pools 0, 1, 2 in order), the rendezvous at pool 0's address,
// and this replica's rank and role.
void place_in_world(const std::string& variable, const PoolAddresses& pools, const SpecTask& task, LaunchEnv& e) {
  const int workers = 1 + static_cast<int>(pools[1].size());
  e.num_servers = static_cast<int>(pools[2].size());
  e.world_size = workers + e.num_servers;
  e.server_addrs = pools[2];
  for (const auto& addr : pools[2]) split_address(variable, addr);  // checked now, used by the servers
  const HostPort master = split_address(variable, pools[0][0]);
  e.master_addr = master.host;
  e.master_port = master.port;
  e.job_id = sanitize("vertex-" + master.host + "-" + std::to_string(master.port));
  e.launcher = "vertex";
  e.role_index = task.index;
  static const std::array<const char*, kPools> kRoles = {"primary", "worker", "server", "evaluator"};
  e.role = kRoles[task.pool];
  e.rank = task.pool == 0   ? 0
           : task.pool == 1 ? 1 + task.index
           : task.pool == 2 ? workers + task.index
                            : -1;
}

// Replicas on one host share a machine: count them in rank order.
void count_local_replicas(const std::string& variable, const PoolAddresses& pools, LaunchEnv& e) {
  e.local_rank = 0;
  e.local_world_size = 1;
  if (e.rank < 0) return;
  std::vector<std::string> world;
  for (int p = 0; p < 3; ++p)
    for (const auto& addr : pools[p]) world.push_back(split_address(variable, addr).host);
  const std::string& mine = world[static_cast<size_t>(e.rank)];
  e.local_world_size = 0;
  for (int r = 0; r < e.world_size; ++r) {
    if (world[static_cast<size_t>(r)] != mine) continue;
    if (r < e.rank) ++e.local_rank;
    ++e.local_world_size;
  }
}

}  // namespace

void apply_cluster_spec(const std::string& variable, const std::string& json_text, LaunchEnv& e) {
  const std::string where = "environment: " + variable + ": ";
  const json doc = parse_spec(where, json_text);
  PoolAddresses pools = read_pools(where, variable, doc.at("cluster"));
  SpecTask task = read_task(where, variable, doc.at("task"));
  promote_first_worker(variable, pools, task);
  check_pools(where, variable, pools, task);
  place_in_world(variable, pools, task, e);
  count_local_replicas(variable, pools, e);
}

}  // namespace meshtrain::comm
