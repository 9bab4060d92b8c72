#include "meshtrain/comm/bootstrap/launch_env.hpp"

#include <cstdlib>
#include <optional>

#include "meshtrain/comm/bootstrap/cluster_spec_env.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {
namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

int env_int(const char* name, int lo, int hi) {
  auto text = env(name);
  if (!text) throw ConfigError(std::string("environment: ") + name + " is not set");
  try {
    size_t used = 0;
    long v = std::stol(*text, &used);
    if (used == text->size() && v >= lo && v <= hi) return int(v);
  } catch (const std::exception&) {
  }
  throw ConfigError(std::string("environment: ") + name + "='" + *text + "' is not an integer in [" +
                    std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

bool env_true(const char* name) {
  auto v = env(name);
  return v && (*v == "1" || *v == "True" || *v == "true");
}

// A job id usable in shared-memory segment names: [A-Za-z0-9._-] only.
std::string sanitized_id(std::string id) {
  for (char& c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-';
    if (!ok) c = '_';
  }
  return id.substr(0, 120);
}

// "4(x2),3" (Slurm's SLURM_TASKS_PER_NODE) -> the first node's count.
int first_node_tasks(const std::string& spec) {
  try {
    return std::stoi(spec);
  } catch (const std::exception&) {
    throw ConfigError("environment: SLURM_TASKS_PER_NODE='" + spec + "' is malformed");
  }
}

constexpr int kMaxWorld = 1 << 20;

// RANK and WORLD_SIZE: meshtrain launch, torchrun, or without
// TORCHELASTIC_RUN_ID Kubeflow's PyTorchJob or any launcher that sets the
// same variables.
void read_rank_variables(LaunchEnv& e) {
  e.launcher = env("MESHTRAIN_JOB_ID") ? "meshtrain" : env("TORCHELASTIC_RUN_ID") ? "torchrun" : "env";
  e.world_size = env_int("WORLD_SIZE", 1, kMaxWorld);
  e.rank = env_int("RANK", 0, e.world_size - 1);
  e.local_known = env("LOCAL_WORLD_SIZE").has_value();
  e.local_rank = env("LOCAL_RANK") ? env_int("LOCAL_RANK", 0, e.world_size - 1) : 0;
  e.local_world_size = e.local_known ? env_int("LOCAL_WORLD_SIZE", 1, e.world_size) : 1;
  if (env_true("TORCHELASTIC_USE_AGENT_STORE")) e.store_host = StoreHost::TorchAgent;
}

void read_slurm_variables(LaunchEnv& e) {
  e.launcher = "slurm";
  e.world_size = env_int("SLURM_NTASKS", 1, kMaxWorld);
  e.rank = env_int("SLURM_PROCID", 0, e.world_size - 1);
  e.local_rank = env("SLURM_LOCALID") ? env_int("SLURM_LOCALID", 0, e.world_size - 1) : 0;
  if (env("SLURM_NTASKS_PER_NODE"))
    e.local_world_size = env_int("SLURM_NTASKS_PER_NODE", 1, e.world_size);
  else if (auto spec = env("SLURM_TASKS_PER_NODE"))
    e.local_world_size = first_node_tasks(*spec);
  else
    e.local_known = false;
  if (auto job = env("SLURM_JOB_ID")) e.job_id = "slurm-" + *job + "-" + env("SLURM_STEP_ID").value_or("0");
}

void read_open_mpi_variables(LaunchEnv& e) {
  e.launcher = "mpirun";
  e.world_size = env_int("OMPI_COMM_WORLD_SIZE", 1, kMaxWorld);
  e.rank = env_int("OMPI_COMM_WORLD_RANK", 0, e.world_size - 1);
  e.local_rank = env("OMPI_COMM_WORLD_LOCAL_RANK") ? env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, e.world_size - 1) : 0;
  e.local_known = env("OMPI_COMM_WORLD_LOCAL_SIZE").has_value();
  e.local_world_size = e.local_known ? env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1, e.world_size) : 1;
}

// The rank, world and local world from the first launcher's variables found
// (launch_env.hpp's order); none: rank 0 of 1.
void read_launcher_variables(LaunchEnv& e) {
  if (env("RANK") || env("WORLD_SIZE"))
    read_rank_variables(e);
  else if (auto spec = env("CLUSTER_SPEC"))
    apply_cluster_spec("CLUSTER_SPEC", *spec, e);
  else if (auto tf = env("TF_CONFIG"))
    apply_cluster_spec("TF_CONFIG", *tf, e);
  else if (env("SLURM_PROCID"))
    read_slurm_variables(e);
  else if (env("OMPI_COMM_WORLD_RANK"))
    read_open_mpi_variables(e);
  if (!e.local_known) e.local_rank = 0;  // provisional: this rank alone, until rendezvous
  if (e.local_rank >= e.local_world_size)
    throw ConfigError("environment: local rank " + std::to_string(e.local_rank) + " is outside the local world of " +
                      std::to_string(e.local_world_size));
}

// Where the rendezvous is, the job's id (and the store keys and secret made
// from it), the network interface and the transports' tuning. `vertex`: the
// cluster spec alone says where peers are.
void read_job_identity(LaunchEnv& e, bool vertex) {
  if (auto addr = env("MASTER_ADDR"); addr && !vertex) e.master_addr = *addr;
  if (env("MASTER_PORT") && !vertex) e.master_port = env_int("MASTER_PORT", 1, 65535);
  if (auto id = env("MESHTRAIN_JOB_ID")) e.job_id = *id;
  if (e.job_id.empty() && e.launcher == "torchrun") {
    // One id per torchrun job and restart: every agent numbers its restarts
    // alike, as torch's own workers rely on ("/worker/attempt_<n>").
    e.job_id = sanitized_id("torchrun-" + env("TORCHELASTIC_RUN_ID").value_or("none") + "-p" +
                            std::to_string(e.master_port) + "-a" +
                            env("TORCHELASTIC_RESTART_COUNT").value_or("0"));
  }
  if (e.job_id.empty()) e.job_id = "port" + std::to_string(e.master_port);
  e.store_prefix = "/meshtrain/" + e.job_id + "/";
  e.socket_ifname = env("MESHTRAIN_SOCKET_IFNAME").value_or("");
  // Without a launcher-made secret the job still runs; connections then
  // prove only that they belong to this job id (see the README's network notes).
  e.token = env("MESHTRAIN_JOB_TOKEN").value_or("meshtrain-job-" + e.job_id);

  e.tcp_congestion = env("MESHTRAIN_TCP_CONGESTION").value_or("");
  if (env("MESHTRAIN_SHM_SINGLE_COPY")) e.shm_single_copy = env_int("MESHTRAIN_SHM_SINGLE_COPY", 0, 1) == 1;
}

void read_transport_choice(LaunchEnv& e) {
  auto t = env("MESHTRAIN_TRANSPORT");
  if (!t) return;
  const auto kind = parse_enum<TransportKind>(*t);
  if (!kind)
    throw ConfigError("environment: MESHTRAIN_TRANSPORT='" + *t + "' is not one of " + enum_choices<TransportKind>());
  e.transport = *kind;
}

// "host:port,host:port" -> its non-empty entries.
std::vector<std::string> split_server_addrs(const std::string& addrs) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= addrs.size()) {
    size_t comma = addrs.find(',', start);
    if (comma == std::string::npos) comma = addrs.size();
    if (comma > start) out.push_back(addrs.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// Worker pool 2's size and addresses, then this rank's role in its pool.
void read_server_pool(LaunchEnv& e) {
  const char* servers_var = env("MESHTRAIN_NUM_SERVERS") ? "MESHTRAIN_NUM_SERVERS" : "MESHTRAIN_NUM_REDUCERS";
  if (env(servers_var)) e.num_servers = env_int(servers_var, 0, e.world_size - 1);
  if (auto addrs = env("MESHTRAIN_SERVER_ADDRS")) e.server_addrs = split_server_addrs(*addrs);
  if (e.rank >= e.num_workers()) {
    e.role = "server";
    e.role_index = e.rank - e.num_workers();
  } else {
    e.role = e.rank == 0 ? "primary" : "worker";
    e.role_index = e.rank == 0 ? 0 : e.rank - 1;
  }
}

}  // namespace

LaunchEnv read_launch_env() {
  LaunchEnv e;
  read_launcher_variables(e);
  const bool vertex = e.launcher == "vertex";  // the cluster spec alone says where peers are
  read_job_identity(e, vertex);
  if (vertex) return e;  // the cluster spec gave the server pool and the role
  read_transport_choice(e);
  read_server_pool(e);
  return e;
}

}  // namespace meshtrain::comm
