#pragma once
// The supervisor's own signals: SIGINT, SIGTERM and SIGUSR1 (Slurm's
// `--signal=B:USR1@120` signals the batch shell's children) are recorded, not
// acted on in the handler; the supervisor's loop reads them and stops the
// workers (replica_supervisor.hpp). One scope at a time.
#include <signal.h>

namespace meshtrain {

class SupervisorSignals {
 public:
  SupervisorSignals();   // installs the handler; forgets earlier signals
  ~SupervisorSignals();  // restores the previous handlers
  SupervisorSignals(const SupervisorSignals&) = delete;
  SupervisorSignals& operator=(const SupervisorSignals&) = delete;

  static int first();     // the first signal received, or 0
  static int received();  // how many

 private:
  struct sigaction old_int_ {}, old_term_ {}, old_usr1_ {};
};

}  // namespace meshtrain
