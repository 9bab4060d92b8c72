#pragma once
// Is a peer process still there? kill(pid, 0) is not enough: a SIGKILLed
// child stays a zombie until its parent reaps it, and a pid can be reused.
// So a process is identified by (pid, start time) and a zombie counts as dead.
#include <cstdint>
#include <sys/types.h>

namespace meshtrain::comm::shm {

// Start time of `pid` in clock ticks since boot (field 22 of /proc/<pid>/stat),
// or 0 if there is no such process or it is a zombie.
uint64_t process_start_time(pid_t pid);

// True while the process (pid, start_time) runs; false once it has exited,
// been killed (zombie or reaped) or its pid belongs to another process.
bool process_alive(pid_t pid, uint64_t start_time);

}  // namespace meshtrain::comm::shm
