#include "meshtrain/comm/bootstrap/connect.hpp"

#include <cstdio>
#include <optional>

#include "meshtrain/comm/bootstrap/job_rendezvous.hpp"
#include "meshtrain/comm/bootstrap/local_ranks.hpp"
#include "meshtrain/comm/bootstrap/network_interface.hpp"
#ifdef MESHTRAIN_HAVE_MPI
#include "meshtrain/comm/transport/mpi/mpi_transport.hpp"
#endif
#include "meshtrain/comm/transport/shm/shm_transport.hpp"
#include "meshtrain/comm/transport/tcp/tcp_transport.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {
namespace {

void log_line(const std::string& message) {  // one write, so ranks' lines do not interleave
  const std::string line = "meshtrain: " + message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

// A channel's shared-memory segment and the TCP store keys are the job's,
// suffixed by the channel's name.
std::unique_ptr<Transport> connect_shm_transport(const LaunchEnv& env, const TransportOptions& options,
                                                 const std::string& channel) {
  if (env.local_world_size != env.world_size)
    throw ConfigError("transport shm: only " + std::to_string(env.local_world_size) + " of " +
                      std::to_string(env.world_size) + " ranks are on this host; use tcp");
  ShmOptions o;
  o.job_id = channel.empty() ? env.job_id : env.job_id + "." + channel;
  o.token = env.token;
  o.rank = env.rank;
  o.world_size = env.world_size;
  o.transport = options;
  if (!env.shm_single_copy) o.single_copy_bytes = o.single_copy_bytes_shared_cores = 0;
  return connect_shm(o);
}

// listen_addr: MESHTRAIN_SOCKET_IFNAME's address, or "" when it is unset.
std::unique_ptr<Transport> connect_tcp_transport(const LaunchEnv& env, const TransportOptions& options,
                                                 rendezvous::KeyValueStore& store, const std::string& listen_addr,
                                                 const std::string& channel) {
  TcpOptions o;
  o.channel = channel;
  o.rank = env.rank;
  o.world_size = env.world_size;
  o.master_addr = env.master_addr;
  o.master_port = static_cast<uint16_t>(env.master_port);
  o.token = env.token;
  o.job_id = env.job_id;
  o.store = &store;
  if (!listen_addr.empty()) {
    // Listen on, and advertise, the chosen interface's address only.
    o.bind_addr = o.advertise_addr = listen_addr;
    if (channel.empty())
      log_line("rank " + std::to_string(env.rank) + " listens on " + o.bind_addr + " (MESHTRAIN_SOCKET_IFNAME=" +
               env.socket_ifname + ")");
  } else if (env.master_addr != "127.0.0.1" && env.master_addr != "localhost") {
    // Peers on other hosts need an address they can reach: listen on every
    // interface and advertise the one that reaches the rendezvous.
    o.bind_addr = "0.0.0.0";
  }
  o.connect_timeout = options.timeout;  // peers that never show up fail within the timeout
  o.transport = options;
  o.congestion = env.tcp_congestion;
  return connect_tcp(o);
}

// The launch environment of the worker ranks alone (the pool-2 ranks come
// last, so the workers keep their ranks).
LaunchEnv workers_only(const LaunchEnv& env) {
  LaunchEnv workers = env;
  workers.world_size = env.num_workers();
  workers.num_servers = 0;
  if (env.local_world_size == env.world_size) workers.local_world_size = workers.world_size;  // one host
  return workers;
}

}  // namespace

std::unique_ptr<Transport> connect_transport(LaunchEnv& env, TransportKind kind,
                                             const TransportOptions& options) {
  return std::move(connect_transports(env, kind, options, {""}).front());
}

std::vector<std::unique_ptr<Transport>> connect_transports(LaunchEnv& env, TransportKind kind,
                                                           const TransportOptions& options,
                                                           const std::vector<std::string>& channels) {
  std::vector<std::unique_ptr<Transport>> transports;
  TransportKind chosen = kind == TransportKind::Auto ? env.transport : kind;
  if (chosen == TransportKind::Mpi) {
#ifdef MESHTRAIN_HAVE_MPI
    MpiOptions o;
    o.expected_rank = env.rank;
    o.expected_world_size = env.world_size;
    o.transport = options;
    transports.push_back(connect_mpi(o));
    return transports;
#else
    throw ConfigError("transport mpi: this build has no MPI transport (CMake did not find MPI)");
#endif
  }
  // Looked up first, so a bad interface name fails before anything waits.
  const std::string listen_addr = env.socket_ifname.empty() ? "" : interface_address(env.socket_ifname);

  const auto choose = [&] { return env.local_world_size == env.world_size ? TransportKind::Shm : TransportKind::Tcp; };
  if (chosen == TransportKind::Auto && env.local_known) chosen = choose();
  // Shared memory with a known local world needs no store: its segment is
  // the rendezvous. Everything else meets at the launcher's store.
  std::optional<JobRendezvous> rdzv;
  if (!env.local_known || chosen == TransportKind::Tcp) rdzv.emplace(env, options.timeout);
  std::string note = rdzv ? "rendezvous through " + rdzv->description() : "";
  if (!env.local_known) {
    const LocalRanks local = learn_local_ranks(rdzv->store(), env.rank, env.world_size);
    env.local_rank = local.local_rank;
    env.local_world_size = local.local_world_size;
    env.local_known = true;
    note += "; the launcher did not say which ranks share a host, so they told each other: " +
            std::to_string(local.num_hosts) + (local.num_hosts == 1 ? " host" : " hosts") + ", " +
            std::to_string(local.local_world_size) + " of " + std::to_string(env.world_size) + " ranks on this one";
  }
  if (env.rank == 0 && !note.empty()) log_line(note);
  if (chosen == TransportKind::Auto) chosen = choose();
  // `rdzv` stays open until the transport is connected (job_rendezvous.hpp).
  // The main channel spans every rank; the others only the workers (ranks
  // 0 .. num_workers-1: reducers and servers talk on the main one).
  const LaunchEnv workers = workers_only(env);
  for (const std::string& channel : channels) {
    const LaunchEnv& members = channel.empty() ? env : workers;
    if (env.rank >= members.world_size) continue;
    transports.push_back(chosen == TransportKind::Shm
                             ? connect_shm_transport(members, options, channel)
                             : connect_tcp_transport(members, options, rdzv->store(), listen_addr, channel));
  }
  return transports;
}

}  // namespace meshtrain::comm
