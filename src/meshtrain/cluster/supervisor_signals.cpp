#include "meshtrain/cluster/supervisor_signals.hpp"

#include <csignal>

namespace meshtrain {
namespace {

volatile std::sig_atomic_t g_signal = 0;   // the first SIGINT, SIGTERM or SIGUSR1 to us
volatile std::sig_atomic_t g_signals = 0;  // how many
void on_signal(int sig) {
  if (!g_signal) g_signal = sig;
  g_signals = g_signals + 1;
}

}  // namespace

SupervisorSignals::SupervisorSignals() {
  g_signal = 0;
  g_signals = 0;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
  sigaction(SIGUSR1, &sa, &old_usr1_);
}

SupervisorSignals::~SupervisorSignals() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGUSR1, &old_usr1_, nullptr);
}

int SupervisorSignals::first() { return g_signal; }
int SupervisorSignals::received() { return g_signals; }

}  // namespace meshtrain
