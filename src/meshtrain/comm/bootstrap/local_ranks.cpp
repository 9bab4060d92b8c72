#include "meshtrain/comm/bootstrap/local_ranks.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>

namespace meshtrain::comm {
namespace {

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line.empty() ? "?" : line;
}

std::string namespace_of(const char* path) {  // "net:[4026531840]"
  char buf[128];
  const ssize_t n = readlink(path, buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "?";
}

}  // namespace

std::string this_host_identity() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '?';
  struct stat shm {};
  const std::string shm_id = stat("/dev/shm", &shm) == 0
                                 ? std::to_string(shm.st_dev) + ":" + std::to_string(shm.st_ino)
                                 : "none";
  return std::string(host) + " boot=" + first_line("/proc/sys/kernel/random/boot_id") +
         " net=" + namespace_of("/proc/self/ns/net") + " pid=" + namespace_of("/proc/self/ns/pid") +
         " shm=" + shm_id;
}

LocalRanks local_ranks_from(const std::vector<std::string>& host_ids, int rank) {
  LocalRanks out;
  out.local_world_size = 0;
  for (size_t r = 0; r < host_ids.size(); ++r) {
    if (host_ids[r] != host_ids[static_cast<size_t>(rank)]) continue;
    if (static_cast<int>(r) < rank) ++out.local_rank;
    ++out.local_world_size;
  }
  out.num_hosts = static_cast<int>(std::set<std::string>(host_ids.begin(), host_ids.end()).size());
  return out;
}

LocalRanks learn_local_ranks(rendezvous::KeyValueStore& store, int rank, int world_size) {
  store.set("host/" + std::to_string(rank), this_host_identity());
  std::vector<std::string> ids(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r) ids[static_cast<size_t>(r)] = store.get("host/" + std::to_string(r));
  return local_ranks_from(ids, rank);
}

}  // namespace meshtrain::comm
