#pragma once
// Seconds on the steady clock since a time point: what step timings, probes
// and progress displays measure with.
#include <chrono>

namespace meshtrain {

inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace meshtrain
