#pragma once
// How a rank waits for its peers without burning the core they need.
//
// A rank with nothing to do (no slot to fill, no chunk to take) backs off in
// three phases, measured from its last progress:
//   spin   (first kSpinWindow)  re-check after one _mm_pause: a chunk from
//          a peer on another core arrives within microseconds, and each
//          pause (~26 ns on Zen 5) adds to the time to notice it. The first
//          kUntimedSpinPasses do not even read the clock. Kept short
//          (and skipped when ranks outnumber cores): when both ranks share
//          a core, the peer runs only once we yield, so a 50 us window made
//          a 4 KiB round trip cost 2 x 52 us; 3 us gives ~5 us;
//   yield  (until kYieldWindow) re-check after sched_yield: with more ranks
//          than cores the peer we wait for may need this core;
//   sleep  (after that)         futex-wait on the rank's doorbell, bounded by
//          kSleepSlice so deadlines and peer deaths are still noticed.
//
// Doorbell protocol (no lost wake-ups): the sleeper stores sleeping = 1,
// issues a full fence, reads doorbell = v, re-checks its rings and only then
// futex-waits while doorbell == v. A peer that publishes head or tail issues
// a full fence, reads the sleeper's `sleeping`, and if set bumps doorbell
// and wakes it. The two fences make at least one side see the other.
#include <atomic>
#include <chrono>
#include <cstdint>

#include "meshtrain/comm/transport/shm/segment_layout.hpp"

namespace meshtrain::comm::shm {

inline constexpr std::chrono::microseconds kSpinWindow{3};
inline constexpr int kUntimedSpinPasses = 32;
inline constexpr std::chrono::microseconds kYieldWindow{2000};
inline constexpr std::chrono::milliseconds kSleepSlice{5};
// How often a waiting rank checks whether its peers are still alive.
inline constexpr std::chrono::milliseconds kLivenessPeriod{5};

// Sleeps while *word == expected, at most `slice` (shared, not private:
// ranks in different processes wait on the same physical page).
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::microseconds slice);
void futex_wake_all(std::atomic<uint32_t>& word);

// The waker's half of the doorbell protocol; call after a release store of
// head or tail that `entry`'s rank may be sleeping on.
inline void wake_if_sleeping(RankEntry& entry) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (entry.sleeping.load(std::memory_order_relaxed) != 0) {
    entry.doorbell.fetch_add(1, std::memory_order_seq_cst);
    futex_wake_all(entry.doorbell);
  }
}

// One pause: 16 of them (~420 ns here) made a 2-rank 4 KiB all-reduce
// notice its peer's data ~200 ns late on average.
void spin_pause();

}  // namespace meshtrain::comm::shm
