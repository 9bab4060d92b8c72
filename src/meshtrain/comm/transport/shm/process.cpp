#include "meshtrain/comm/transport/shm/process.hpp"

#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace meshtrain::comm::shm {

uint64_t process_start_time(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", int(pid));
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[1024];
  ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  // "pid (comm) state ppid ..." and comm may contain spaces or ')': parse
  // from the last ')'. After it: field 3 (state) ... field 22 (starttime).
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr || p[1] != ' ') return 0;
  p += 2;
  const char state = *p;
  if (state == 'Z' || state == 'X' || state == 'x') return 0;
  for (int field = 3; field < 22; ++field) {
    p = std::strchr(p, ' ');
    if (p == nullptr) return 0;
    ++p;
  }
  unsigned long long ticks = 0;
  if (std::sscanf(p, "%llu", &ticks) != 1) return 0;
  return ticks == 0 ? 1 : ticks;  // 0 means "gone"; a process started at tick 0 still exists
}

bool process_alive(pid_t pid, uint64_t start_time) {
  if (pid <= 0) return false;
  if (pid == ::getpid()) return true;  // ranks as threads of this process
  return process_start_time(pid) == start_time;
}

}  // namespace meshtrain::comm::shm
