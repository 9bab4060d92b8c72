#pragma once
// How many OpenMP threads one process takes: one rule for every role that
// computes (trainer workers, parameter-server workers and servers, the
// forecasts that predict them), so a job's processes and its forecast agree.
//   requested > 0            requested (training.threads)
//   one process on the host  the default team: OMP_NUM_THREADS if set, else
//                            every core
//   n processes on the host  cores / n, at least 1: n teams of every core
//                            would oversubscribe the host, which slows
//                            OpenMP's barriers down many times
#include <cstdint>

namespace meshtrain {

struct HostCpu {
  int cores = 1;         // the cores this process may run on
  int default_team = 1;  // OMP_NUM_THREADS's first value, else cores
};

// This host, read once (later omp_set_num_threads calls do not change it).
const HostCpu& this_host_cpu();

int threads_for(int64_t requested, int processes_on_host, const HostCpu& host);
int threads_for(int64_t requested, int processes_on_host);

// Sets the team of this process's later parallel regions.
void use_threads(int threads);

}  // namespace meshtrain
