#pragma once
// Builds this rank's Transport from its launch environment.
#include <memory>
#include <string>

#include "meshtrain/comm/bootstrap/launch_env.hpp"
#include "meshtrain/comm/transport/transport.hpp"

namespace meshtrain::comm {

// kind: "auto" (the launcher's choice, env.transport, when it made one;
// else shared memory when every rank is on this host, TCP otherwise), "shm",
// "tcp" or "mpi" (only under mpirun/srun with an MPI build).
//
// Where the launcher did not say which ranks share a host (!env.local_known),
// the ranks learn it at rendezvous first (local_ranks.hpp) and `env`'s
// local_rank and local_world_size are updated. The rendezvous store is the
// launcher's (job_rendezvous.hpp): torchrun's agent store, else rank 0's own.
//
// Throws ConfigError for an unknown kind or a bad MESHTRAIN_SOCKET_IFNAME,
// CommError when peers do not show up within options.timeout.
std::unique_ptr<Transport> connect_transport(LaunchEnv& env, const std::string& kind,
                                             const TransportOptions& options);

}  // namespace meshtrain::comm
