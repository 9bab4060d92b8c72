#include "meshtrain/comm/transport/shm/waiter.hpp"

#include <climits>
#include <ctime>
#include <immintrin.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace meshtrain::comm::shm {

void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::microseconds slice) {
  timespec ts{};
  ts.tv_sec = slice.count() / 1000000;
  ts.tv_nsec = (slice.count() % 1000000) * 1000;
  // EAGAIN (value changed), EINTR and ETIMEDOUT all mean "look again".
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void spin_pause() { _mm_pause(); }

}  // namespace meshtrain::comm::shm
