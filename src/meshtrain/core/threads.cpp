#include "meshtrain/core/threads.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdlib>

namespace meshtrain {
namespace {

// OMP_NUM_THREADS's first value ("4" or "4,2" for nested teams); 0 when unset
// or not a positive number.
int omp_num_threads_env() {
  const char* text = std::getenv("OMP_NUM_THREADS");
  if (!text) return 0;
  char* end = nullptr;
  const long n = std::strtol(text, &end, 10);
  return end != text && n > 0 ? int(std::min<long>(n, 1 << 20)) : 0;
}

HostCpu read_host_cpu() {
  HostCpu host;
  host.cores = std::max(1, omp_get_num_procs());
  const int env = omp_num_threads_env();
  host.default_team = env > 0 ? env : host.cores;
  return host;
}

}  // namespace

const HostCpu& this_host_cpu() {
  static const HostCpu host = read_host_cpu();
  return host;
}

int threads_for(int64_t requested, int processes_on_host, const HostCpu& host) {
  if (requested > 0) return int(std::min<int64_t>(requested, 1 << 20));
  if (processes_on_host <= 1) return std::max(1, host.default_team);
  return std::max(1, host.cores / processes_on_host);
}

int threads_for(int64_t requested, int processes_on_host) {
  return threads_for(requested, processes_on_host, this_host_cpu());
}

void use_threads(int threads) { omp_set_num_threads(std::max(1, threads)); }

}  // namespace meshtrain
