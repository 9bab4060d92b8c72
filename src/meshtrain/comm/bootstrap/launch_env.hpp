#pragma once
// Where a rank learns who it is and where its peers are: the environment its
// launcher set. Recognized, in this order:
//   meshtrain launch / torchrun  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
//   / Kubeflow PyTorchJob        MASTER_ADDR, MASTER_PORT (+ MESHTRAIN_JOB_ID,
//                                MESHTRAIN_JOB_TOKEN from meshtrain launch;
//                                torchrun's TORCHELASTIC_RUN_ID,
//                                TORCHELASTIC_RESTART_COUNT and
//                                TORCHELASTIC_USE_AGENT_STORE; PyTorchJob sets
//                                only RANK, WORLD_SIZE and MASTER_*)
//   Vertex AI / meshtrain submit CLUSTER_SPEC, else TF_CONFIG (JSON; see
//                                cluster_spec_env.hpp), + MESHTRAIN_JOB_ID and
//                                MESHTRAIN_JOB_TOKEN when meshtrain submit sets them
//   Slurm (srun)                 SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
//                                SLURM_NTASKS_PER_NODE / SLURM_TASKS_PER_NODE,
//                                SLURM_JOB_ID, MASTER_ADDR/MASTER_PORT if set
//   Open MPI (mpirun)            OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
//                                OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE
// With none of them, the process is rank 0 of 1. Where the launcher does not
// say how many ranks share this host (no LOCAL_WORLD_SIZE, ...), the ranks
// learn it at rendezvous (local_ranks.hpp) before choosing a transport.
//
// Worker pool 2 (reducers or parameter servers, as the job's config says)
// holds the LAST num_servers ranks of the world: ranks num_workers() ..
// world_size-1. meshtrain's launchers set MESHTRAIN_NUM_SERVERS (or its older
// name MESHTRAIN_NUM_REDUCERS) and, for parameter servers, the address each
// listens on in MESHTRAIN_SERVER_ADDRS ("host:port,host:port,...").
#include <string>
#include <vector>

#include "meshtrain/comm/bootstrap/transport_kind.hpp"

namespace meshtrain::comm {

// Who hosts the rendezvous store at MASTER_ADDR:MASTER_PORT.
enum class StoreHost {
  Rank0,       // meshtrain's own store, started by rank 0 (store_server.hpp)
  TorchAgent,  // torchrun's agent already hosts a PyTorch TCPStore there
};

struct LaunchEnv {
  std::string launcher = "none";  // "meshtrain", "torchrun", "vertex", "slurm", "mpirun", "none"
  int rank = 0;  // -1 for an evaluator: it is outside the world
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  // False when the launcher did not say (Kubeflow's PyTorchJob, srun without
  // SLURM_TASKS_PER_NODE, ...): local_rank and local_world_size are then
  // provisional (this rank alone) until learned at rendezvous.
  bool local_known = true;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string job_id;  // names shared-memory segments; unique per job
  std::string token;   // per-job secret for rendezvous and data connections
  StoreHost store_host = StoreHost::Rank0;
  // Every key meshtrain puts in a store it shares (torchrun's): one per job
  // and restart, so a restarted group never reads the keys of the old one.
  std::string store_prefix;
  // MESHTRAIN_SOCKET_IFNAME ("" when unset): the network interface whose
  // address a rank listens on and advertises (network_interface.hpp).
  std::string socket_ifname;

  // The transport the launcher chose for the whole job (MESHTRAIN_TRANSPORT):
  // what "auto" means to every rank, workers and reducers alike, so they
  // cannot pick different ones. Auto when unset.
  TransportKind transport = TransportKind::Auto;
  // MESHTRAIN_TCP_CONGESTION ("" when unset): the TCP transport's congestion
  // control (comm/transport/tcp/congestion.hpp).
  std::string tcp_congestion;
  // MESHTRAIN_SHM_SINGLE_COPY=0 sends every shm message through the slots
  // (comm/transport/shm/single_copy.hpp); 1 (the default) lets large ones
  // go single-copy where the kernel allows it.
  bool shm_single_copy = true;

  int num_servers = 0;                    // pool 2: the last num_servers ranks
  std::vector<std::string> server_addrs;  // pool 2's host:port, when they listen (parameter servers)
  // "primary" (rank 0), "worker", "server" (pool 2) or "evaluator" (pool 3, outside the world).
  std::string role = "primary";
  int role_index = 0;  // index within the role's pool

  int num_workers() const { return world_size - num_servers; }
};

// Reads the environment. Throws ConfigError naming the variable when one is
// malformed or inconsistent (RANK outside [0, WORLD_SIZE), ...).
LaunchEnv read_launch_env();

}  // namespace meshtrain::comm
