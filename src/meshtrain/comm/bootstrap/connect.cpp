#include "meshtrain/comm/bootstrap/connect.hpp"

#ifdef MESHTRAIN_HAVE_MPI
#include "meshtrain/comm/transport/mpi/mpi_transport.hpp"
#endif
#include "meshtrain/comm/transport/shm/shm_transport.hpp"
#include "meshtrain/comm/transport/tcp/tcp_transport.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {

std::unique_ptr<Transport> connect_transport(const LaunchEnv& env, const std::string& kind,
                                             const TransportOptions& options) {
  std::string chosen = kind == "auto" ? env.transport : kind;
  if (chosen == "auto") chosen = env.local_world_size == env.world_size ? "shm" : "tcp";
  if (chosen == "shm") {
    if (env.local_world_size != env.world_size)
      throw ConfigError("transport shm: only " + std::to_string(env.local_world_size) + " of " +
                        std::to_string(env.world_size) + " ranks are on this host; use tcp");
    ShmOptions o;
    o.job_id = env.job_id;
    o.token = env.token;
    o.rank = env.rank;
    o.world_size = env.world_size;
    o.transport = options;
    if (!env.shm_single_copy) o.single_copy_bytes = o.single_copy_bytes_shared_cores = 0;
    return connect_shm(o);
  }
  if (chosen == "tcp") {
    TcpOptions o;
    o.rank = env.rank;
    o.world_size = env.world_size;
    o.master_addr = env.master_addr;
    o.master_port = static_cast<uint16_t>(env.master_port);
    o.token = env.token;
    o.job_id = env.job_id;
    // Peers on other hosts need an address they can reach: listen where the
    // rendezvous lives when it is not loopback.
    if (env.master_addr != "127.0.0.1" && env.master_addr != "localhost") o.bind_addr = "0.0.0.0";
    o.connect_timeout = options.timeout;  // peers that never show up fail within the timeout
    o.transport = options;
    o.congestion = env.tcp_congestion;
    return connect_tcp(o);
  }
  if (chosen == "mpi") {
#ifdef MESHTRAIN_HAVE_MPI
    MpiOptions o;
    o.expected_rank = env.rank;
    o.expected_world_size = env.world_size;
    o.transport = options;
    return connect_mpi(o);
#else
    throw ConfigError("transport mpi: this build has no MPI transport (CMake did not find MPI)");
#endif
  }
  throw ConfigError("transport: unknown kind '" + kind + "' (expected auto, shm, tcp, mpi)");
}

}  // namespace meshtrain::comm
