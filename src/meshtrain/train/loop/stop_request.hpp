#pragma once
// A preemption notice for the training loop. Kubernetes evictions, Spot VMs
// and EC2 send SIGTERM; Slurm's `--signal=USR1@120` sends SIGUSR1. The first
// of either only records itself: the loop finishes the step in flight, every
// worker agrees on the step to stop at, and the last checkpoint is written
// before the process exits with kExitPreempted (core/error.hpp). A second
// signal, a second or more after the first, exits at once with status
// 128 + signal: checkpoints appear by an atomic rename, so the newest
// complete one stays as it was. (Sooner, it is the same notice delivered
// twice: the scheduler signals every process and the supervisor passes its
// own signal on.)
//
// The signals are blocked in every thread and taken by one thread of their
// own (sigwait): a handler would interrupt whichever thread it lands on, in
// the middle of a transfer or an allocation, and nothing in the training
// loop's threads has to care about EINTR.
namespace meshtrain {

// From here on this process waits for SIGTERM and SIGUSR1 as above. Call it
// before the process starts any other thread (those inherit the blocked
// signals); a second call does nothing.
void watch_stop_signals();

// The first stop signal received (SIGTERM or SIGUSR1), or 0.
int stop_signal();

// "SIGTERM", "SIGUSR1", "SIGINT", else "a signal".
const char* signal_name(int sig);

}  // namespace meshtrain
