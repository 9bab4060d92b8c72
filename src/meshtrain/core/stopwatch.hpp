#pragma once
// Seconds on the steady clock since a time point: what step timings, probes
// and progress displays measure with; and the calling thread's CPU time, for
// probes that share too few cores (a thread's CPU time leaves out the time
// it waited for one).
#include <time.h>

#include <chrono>

namespace meshtrain {

inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

inline double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

}  // namespace meshtrain
