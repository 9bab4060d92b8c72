#pragma once
// Builds this rank's Transport from its launch environment.
#include <memory>
#include <string>

#include "meshtrain/comm/bootstrap/launch_env.hpp"
#include "meshtrain/comm/transport/transport.hpp"

namespace meshtrain::comm {

// kind: "auto" (the launcher's choice, env.transport, when it made one;
// else shared memory when every rank is on this host, TCP otherwise), "shm", "tcp" or "mpi" (only under mpirun/srun with an MPI
// build). Throws ConfigError for an unknown kind, CommError when peers do
// not show up within options.timeout.
std::unique_ptr<Transport> connect_transport(const LaunchEnv& env, const std::string& kind,
                                             const TransportOptions& options);

}  // namespace meshtrain::comm
