#pragma once
// What a collective benchmark measures and how it prints it: one JSON line
// per (collective, size). Shared by `meshtrain bench collectives` and the
// peer benchmarks in bench/ (OpenMPI, Gloo), so every program reports the
// same fields with the same definitions and the same iteration schedule.
//
// Definitions (nccl-tests, doc/PERFORMANCE.md):
//   time_us     median over the timed iterations of the slowest rank's time
//               for one call (each rank times every call; the per-iteration
//               maximum over ranks is taken before the median).
//   algbw_GBps  bytes / time (1 GB = 1e9 bytes).
//   busbw_GBps  algbw * 2(n-1)/n for all-reduce: the bandwidth each rank's
//               link must sustain, comparable across world sizes and with the
//               hardware's peak. 0 for n = 1.
#include <cstddef>
#include <string>
#include <vector>

namespace meshtrain::comm::bench {

struct BenchResult {
  std::string collective = "all_reduce";
  std::string algo;       // "ring", "auto", "MPI_Allreduce", "ring_chunked", ...
  std::string transport;  // "shm", "tcp", "mpi", "openmpi", "gloo_tcp", ...
  int nproc = 1;          // ranks taking part (workers; reducers not counted)
  int reducers = 0;       // printed only when > 0
  std::string chosen;     // for algo "auto": what the cost table picked; printed when set
  size_t bytes = 0;
  int iters = 0;
  double time_us = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
};

// Fills time_us, algbw and busbw from per-iteration times in seconds (the
// per-iteration maximum over ranks).
void finish_all_reduce(BenchResult& result, std::vector<double> seconds_per_iter);

// {"collective":"all_reduce","algo":"ring",...} on one line, no newline.
std::string to_json(const BenchResult& result);

// "4K:256M" -> 4096, 8192, ..., 268435456 (doubling from low to high; the
// high bound is included when it lies on the doubling sequence). Suffixes
// K, M, G are powers of 1024; a plain number is bytes. Throws ConfigError.
std::vector<size_t> parse_size_range(const std::string& text);
size_t parse_bytes(const std::string& text);

// The iteration schedule, a function of the size only, so every rank and
// every program agrees without talking: `iters` timed calls up to 8 MiB,
// then fewer in proportion to the size (at least 3), so one benchmark run
// of 4K..256M stays within seconds.
int timed_iterations(size_t bytes, int iters);
int warmup_iterations(size_t bytes, int iters);

}  // namespace meshtrain::comm::bench
