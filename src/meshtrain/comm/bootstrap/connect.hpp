#pragma once
// Builds this rank's Transport from its launch environment.
#include <memory>
#include <string>
#include <vector>

#include "meshtrain/comm/bootstrap/launch_env.hpp"
#include "meshtrain/comm/bootstrap/transport_kind.hpp"
#include "meshtrain/comm/transport/transport.hpp"

namespace meshtrain::comm {

// kind: Auto (the launcher's choice, env.transport, when it made one; else
// shared memory when every rank is on this host, TCP otherwise), Shm, Tcp or
// Mpi (only under mpirun/srun with an MPI build).
//
// Where the launcher did not say which ranks share a host (!env.local_known),
// the ranks learn it at rendezvous first (local_ranks.hpp) and `env`'s
// local_rank and local_world_size are updated. The rendezvous store is the
// launcher's (job_rendezvous.hpp): torchrun's agent store, else rank 0's own.
//
// Throws ConfigError for Mpi without MPI or a bad MESHTRAIN_SOCKET_IFNAME,
// CommError when peers do not show up within options.timeout.
std::unique_ptr<Transport> connect_transport(LaunchEnv& env, TransportKind kind,
                                             const TransportOptions& options);

// Several transports over the same ranks from one rendezvous, one per
// channel ("" first: the main one). Each is an ordered stream of its own
// (its own shared-memory segment, or its own sockets), so an operation on
// one never waits behind another's: a channel per mesh axis keeps a
// tensor-parallel all-reduce on the critical path from queueing behind a
// data-parallel gradient bucket. The main channel spans every rank, the
// others the workers only (reducers and servers need one channel, and are
// not asked for more); a reducer or server rank gets the main one alone.
// MPI gives one transport whatever is asked (its ranks are one
// communicator); the caller then shares it.
std::vector<std::unique_ptr<Transport>> connect_transports(LaunchEnv& env, TransportKind kind,
                                                           const TransportOptions& options,
                                                           const std::vector<std::string>& channels);

}  // namespace meshtrain::comm
