#pragma once
// Which ranks share this host, learned at rendezvous when the launcher does
// not say (Kubeflow's PyTorchJob sets no LOCAL_WORLD_SIZE; neither does srun
// without SLURM_TASKS_PER_NODE). Each rank publishes its host identity and
// reads everyone's; ranks with the same identity are local to each other.
//
// "The same host" means what the shared-memory transport needs: the same
// running kernel (boot id), the same /dev/shm, the same pid namespace (ranks
// watch each other's pids) and the same network namespace. Containers on one
// machine, such as two Kubernetes pods, differ in these and count as two
// hosts; so do two network namespaces made with `ip netns` (the multi-host
// tests rely on that).
#include <string>
#include <vector>

#include "meshtrain/comm/rendezvous/key_value_store.hpp"

namespace meshtrain::comm {

// "<hostname> boot=<boot id> net=<ns> pid=<ns> shm=<dev>:<ino>"
std::string this_host_identity();

struct LocalRanks {
  int local_rank = 0;
  int local_world_size = 1;
  int num_hosts = 1;
};

// Ranks r with host_ids[r] == host_ids[rank]; this rank's index among them.
LocalRanks local_ranks_from(const std::vector<std::string>& host_ids, int rank);

// Publishes this rank's identity under "host/<rank>" and reads every rank's.
LocalRanks learn_local_ranks(rendezvous::KeyValueStore& store, int rank, int world_size);

}  // namespace meshtrain::comm
