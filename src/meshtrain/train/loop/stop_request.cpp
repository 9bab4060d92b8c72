#include "meshtrain/train/loop/stop_request.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <mutex>
#include <thread>

#include "meshtrain/core/error.hpp"

namespace meshtrain {
namespace {

std::atomic<int> g_first_signal{0};
constexpr std::chrono::milliseconds kSameNotice{1000};  // a second signal sooner is the same notice

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  return set;
}

[[noreturn]] void wait_for_signals(sigset_t set) {
  std::chrono::steady_clock::time_point first;
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    int none = 0;
    if (g_first_signal.compare_exchange_strong(none, sig)) {
      first = std::chrono::steady_clock::now();
      continue;
    }
    // One notice often arrives twice: a scheduler signals every process
    // while the supervisor passes its own signal on too.
    if (std::chrono::steady_clock::now() - first < kSameNotice) continue;
    // The second: the user or the scheduler will not wait.
    static const char kLine[] = "meshtrain: second stop signal: exiting now, without a checkpoint of this step\n";
    (void)!write(STDERR_FILENO, kLine, sizeof kLine - 1);
    _exit(128 + sig);
  }
}

}  // namespace

void watch_stop_signals() {
  static std::once_flag once;
  std::call_once(once, [] {
    const sigset_t set = stop_signals();
    if (const int rc = pthread_sigmask(SIG_BLOCK, &set, nullptr); rc != 0)
      throw Error(std::string("cannot block the stop signals: ") + std::strerror(rc));
    std::thread(wait_for_signals, set).detach();  // lives as long as the process
  });
}

int stop_signal() { return g_first_signal.load(std::memory_order_relaxed); }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGINT: return "SIGINT";
    default: return "a signal";
  }
}

}  // namespace meshtrain
