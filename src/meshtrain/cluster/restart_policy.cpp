#include "meshtrain/cluster/restart_policy.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "meshtrain/cluster/supervisor_signals.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain {

// Bad configuration or input fails again however often it is rerun, and a
// diverged run diverges again from the same checkpoint.
bool RestartPolicy::retryable(int status) {
  return !exited_with(status, kExitBadInput) && !exited_with(status, kExitDiverged);
}

std::string RestartPolicy::stopping_note(int status) const {
  const bool retry = retryable(status);
  if (may_restart_group(retry)) return "; stopping the others to restart the whole job";
  if (retry) return "; stopping the others";
  if (exited_with(status, kExitDiverged)) return " (the training diverged: not restarted); stopping the others";
  return " (bad configuration or input: not restarted); stopping the others";
}

int RestartPolicy::wait_to_restart_group(OutputForwarder& forwarder) {
  // Backoff: a failure with a cause outside the job (a full disk, a busy
  // port) gets time to clear, and a job that fails at once does not spin.
  std::chrono::milliseconds backoff = options_.restart_backoff;
  for (int k = 0; k < restarts_ && backoff < options_.max_restart_backoff; ++k) backoff *= 2;
  backoff = std::min(backoff, options_.max_restart_backoff);
  ++restarts_;
  forwarder.line(options_.name, "restarting the whole job in " + seconds_text(backoff.count() / 1000.0) +
                                    " (restart " + std::to_string(restarts_) + " of " +
                                    std::to_string(options_.max_restarts) + ")");
  const auto until = std::chrono::steady_clock::now() + backoff;
  while (std::chrono::steady_clock::now() < until && !SupervisorSignals::first()) usleep(20000);
  return SupervisorSignals::first();
}

}  // namespace meshtrain
