#include "meshtrain/core/threads.hpp"

#include <gtest/gtest.h>

namespace meshtrain {
namespace {

constexpr HostCpu kSixteenCores{.cores = 16, .default_team = 16};

TEST(ThreadsFor, ARequestedCountIsTakenAsItIs) {
  EXPECT_EQ(threads_for(3, 1, kSixteenCores), 3);
  EXPECT_EQ(threads_for(3, 8, kSixteenCores), 3);
  EXPECT_EQ(threads_for(32, 1, kSixteenCores), 32);  // asked for: oversubscribing is the user's call
}

TEST(ThreadsFor, OneProcessTakesTheDefaultTeam) {
  EXPECT_EQ(threads_for(0, 1, kSixteenCores), 16);
  EXPECT_EQ(threads_for(0, 0, kSixteenCores), 16);  // unknown: this process alone
  EXPECT_EQ(threads_for(0, 1, {.cores = 16, .default_team = 4}), 4);  // OMP_NUM_THREADS=4
}

TEST(ThreadsFor, ProcessesSharingAHostSplitItsCores) {
  EXPECT_EQ(threads_for(0, 2, kSixteenCores), 8);
  EXPECT_EQ(threads_for(0, 3, kSixteenCores), 5);  // 2 PS workers + 1 server: 15 threads on 16 cores
  EXPECT_EQ(threads_for(0, 16, kSixteenCores), 1);
  EXPECT_EQ(threads_for(0, 3, {.cores = 2, .default_team = 2}), 1);  // never 0
  // OMP_NUM_THREADS is one process's team; the share is of the cores.
  EXPECT_EQ(threads_for(0, 2, {.cores = 16, .default_team = 4}), 8);
}

TEST(ThreadsFor, NeverMoreProcessThreadsThanCoresUnlessAsked) {
  for (int cores = 1; cores <= 64; ++cores)
    for (int processes = 2; processes <= 17; ++processes) {
      const int threads = threads_for(0, processes, {.cores = cores, .default_team = cores});
      EXPECT_GE(threads, 1);
      if (processes <= cores) {
        EXPECT_LE(threads * processes, cores) << cores << " cores, " << processes;
      }
    }
}

TEST(ThreadsFor, ThisHostHasAtLeastOneCore) {
  EXPECT_GE(this_host_cpu().cores, 1);
  EXPECT_GE(this_host_cpu().default_team, 1);
  EXPECT_GE(threads_for(0, 1), 1);
}

}  // namespace
}  // namespace meshtrain
