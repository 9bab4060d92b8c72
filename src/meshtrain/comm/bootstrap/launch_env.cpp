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

// "4(x2),3" (Slurm's SLURM_TASKS_PER_NODE) -> the first node's count.
int first_node_tasks(const std::string& spec) {
  try {
    return std::stoi(spec);
  } catch (const std::exception&) {
    throw ConfigError("environment: SLURM_TASKS_PER_NODE='" + spec + "' is malformed");
  }
}

}  // namespace

LaunchEnv read_launch_env() {
  LaunchEnv e;
  constexpr int kMaxWorld = 1 << 20;
  if (env("RANK") || env("WORLD_SIZE")) {
    e.launcher = env("MESHTRAIN_JOB_ID") ? "meshtrain" : "torchrun";
    e.world_size = env_int("WORLD_SIZE", 1, kMaxWorld);
    e.rank = env_int("RANK", 0, e.world_size - 1);
    e.local_rank = env("LOCAL_RANK") ? env_int("LOCAL_RANK", 0, e.world_size - 1) : e.rank;
    e.local_world_size = env("LOCAL_WORLD_SIZE") ? env_int("LOCAL_WORLD_SIZE", 1, e.world_size) : e.world_size;
  } else if (auto spec = env("CLUSTER_SPEC")) {
    apply_cluster_spec("CLUSTER_SPEC", *spec, e);
  } else if (auto tf = env("TF_CONFIG")) {
    apply_cluster_spec("TF_CONFIG", *tf, e);
  } else if (env("SLURM_PROCID")) {
    e.launcher = "slurm";
    e.world_size = env_int("SLURM_NTASKS", 1, kMaxWorld);
    e.rank = env_int("SLURM_PROCID", 0, e.world_size - 1);
    e.local_rank = env("SLURM_LOCALID") ? env_int("SLURM_LOCALID", 0, e.world_size - 1) : 0;
    if (env("SLURM_NTASKS_PER_NODE"))
      e.local_world_size = env_int("SLURM_NTASKS_PER_NODE", 1, e.world_size);
    else if (auto spec = env("SLURM_TASKS_PER_NODE"))
      e.local_world_size = first_node_tasks(*spec);
    else
      e.local_world_size = 1;
    if (auto job = env("SLURM_JOB_ID")) e.job_id = "slurm-" + *job + "-" + env("SLURM_STEP_ID").value_or("0");
  } else if (env("OMPI_COMM_WORLD_RANK")) {
    e.launcher = "mpirun";
    e.world_size = env_int("OMPI_COMM_WORLD_SIZE", 1, kMaxWorld);
    e.rank = env_int("OMPI_COMM_WORLD_RANK", 0, e.world_size - 1);
    e.local_rank = env("OMPI_COMM_WORLD_LOCAL_RANK") ? env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, e.world_size - 1) : 0;
    e.local_world_size =
        env("OMPI_COMM_WORLD_LOCAL_SIZE") ? env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1, e.world_size) : 1;
  }
  if (e.local_rank >= e.local_world_size)
    throw ConfigError("environment: local rank " + std::to_string(e.local_rank) + " is outside the local world of " +
                      std::to_string(e.local_world_size));
  const bool vertex = e.launcher == "vertex";  // the cluster spec alone says where peers are
  if (auto addr = env("MASTER_ADDR"); addr && !vertex) e.master_addr = *addr;
  if (env("MASTER_PORT") && !vertex) e.master_port = env_int("MASTER_PORT", 1, 65535);
  if (auto id = env("MESHTRAIN_JOB_ID")) e.job_id = *id;
  if (e.job_id.empty()) e.job_id = "port" + std::to_string(e.master_port);
  // Without a launcher-made secret the job still runs; connections then
  // prove only that they belong to this job id (see the README's network notes).
  e.token = env("MESHTRAIN_JOB_TOKEN").value_or("meshtrain-job-" + e.job_id);

  e.tcp_congestion = env("MESHTRAIN_TCP_CONGESTION").value_or("");
  if (env("MESHTRAIN_SHM_SINGLE_COPY")) e.shm_single_copy = env_int("MESHTRAIN_SHM_SINGLE_COPY", 0, 1) == 1;

  if (vertex) return e;
  if (auto t = env("MESHTRAIN_TRANSPORT")) {
    if (*t != "auto" && *t != "shm" && *t != "tcp" && *t != "mpi")
      throw ConfigError("environment: MESHTRAIN_TRANSPORT='" + *t + "' is not one of auto, shm, tcp, mpi");
    e.transport = *t;
  }
  const char* servers_var = env("MESHTRAIN_NUM_SERVERS") ? "MESHTRAIN_NUM_SERVERS" : "MESHTRAIN_NUM_REDUCERS";
  if (env(servers_var)) e.num_servers = env_int(servers_var, 0, e.world_size - 1);
  if (auto addrs = env("MESHTRAIN_SERVER_ADDRS")) {
    size_t start = 0;
    while (start <= addrs->size()) {
      size_t comma = addrs->find(',', start);
      if (comma == std::string::npos) comma = addrs->size();
      if (comma > start) e.server_addrs.push_back(addrs->substr(start, comma - start));
      start = comma + 1;
    }
  }
  if (e.rank >= e.num_workers()) {
    e.role = "server";
    e.role_index = e.rank - e.num_workers();
  } else {
    e.role = e.rank == 0 ? "primary" : "worker";
    e.role_index = e.rank == 0 ? 0 : e.rank - 1;
  }
  return e;
}

}  // namespace meshtrain::comm
