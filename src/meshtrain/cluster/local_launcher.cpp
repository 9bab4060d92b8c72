#include "meshtrain/cluster/local_launcher.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "meshtrain/core/error.hpp"

namespace meshtrain {

int pick_free_port(const std::string& addr) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error(std::string("launch: socket: ") + std::strerror(errno));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = 0;
  if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) {
    close(fd);
    throw Error("launch: '" + addr + "' is not an IPv4 address");
  }
  socklen_t len = sizeof sa;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    int e = errno;
    close(fd);
    throw Error("launch: cannot find a free port on " + addr + ": " + std::strerror(e));
  }
  close(fd);
  return ntohs(sa.sin_port);
}

std::string random_token() {
  unsigned char bytes[16];
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  if (!urandom.read(reinterpret_cast<char*>(bytes), sizeof bytes)) throw Error("launch: cannot read /dev/urandom");
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned char b : bytes) {
    s += hex[b >> 4];
    s += hex[b & 15];
  }
  return s;
}

WorldInfo new_local_world(int world_size, int num_servers, const std::string& master_addr, int master_port) {
  WorldInfo w;
  w.world_size = world_size;
  w.num_servers = num_servers;
  w.master_addr = master_addr;
  w.master_port = master_port > 0 ? master_port : pick_free_port(master_addr);
  w.token = random_token();
  w.job_id = "job-" + std::to_string(getpid()) + "-" + w.token.substr(0, 8);
  return w;
}

std::vector<std::string> rank_environment(const WorldInfo& w, int rank) {
  std::vector<std::string> env = {
      "RANK=" + std::to_string(rank),        "WORLD_SIZE=" + std::to_string(w.world_size),
      "LOCAL_RANK=" + std::to_string(rank),  "LOCAL_WORLD_SIZE=" + std::to_string(w.world_size),
      "MASTER_ADDR=" + w.master_addr,        "MASTER_PORT=" + std::to_string(w.master_port),
      "MESHTRAIN_JOB_ID=" + w.job_id,        "MESHTRAIN_JOB_TOKEN=" + w.token,
      "MESHTRAIN_NUM_SERVERS=" + std::to_string(w.num_servers),
      "MESHTRAIN_NUM_REDUCERS=" + std::to_string(w.num_servers)};
  if (!w.server_addrs.empty()) {
    std::string addrs;
    for (const auto& a : w.server_addrs) addrs += (addrs.empty() ? "" : ",") + a;
    env.push_back("MESHTRAIN_SERVER_ADDRS=" + addrs);
  }
  if (w.transport != comm::TransportKind::Auto)
    env.push_back("MESHTRAIN_TRANSPORT=" + enum_string(w.transport));
  return env;
}

LaunchResult launch_local(const LaunchOptions& o, std::FILE* out) {
  if (o.nproc < 1) throw Error("launch: --nproc must be at least 1, got " + std::to_string(o.nproc));
  if (o.command.empty()) throw Error("launch: no command given (usage: meshtrain launch --nproc N -- COMMAND...)");
  if (o.reducers < 0) throw Error("launch: --reducers must not be negative, got " + std::to_string(o.reducers));
  if (o.reducers > 0 && o.reducer_command.empty()) throw Error("launch: reducers need a reducer command");
  WorldInfo world = new_local_world(o.nproc + o.reducers, o.reducers, o.master_addr, o.master_port);
  world.transport = o.transport;
  std::vector<Replica> replicas;
  for (int r = 0; r < world.world_size; ++r) {
    const bool reducer = r >= o.nproc;
    replicas.push_back({"rank " + std::to_string(r), reducer ? o.reducer_command : o.command,
                        rank_environment(world, r), reducer ? ReplicaKind::Service : ReplicaKind::Worker});
  }
  SupervisorOptions options;
  options.name = "launch";
  options.grace = o.grace;
  options.stop_grace = o.stop_grace;
  SupervisorResult s = supervise(replicas, options, out);
  return {s.exit_code, s.failed, s.failure};
}

}  // namespace meshtrain
