#pragma once
// The all-reduce benchmark loop of `meshtrain bench collectives`, run by
// every worker of a process group (reducer ranks run
// reduction_server::serve instead).
//
// Per size, smallest first:
//   check    (with `check`) every rank fills known integers, all-reduces
//            once and compares every element exactly; a wrong one throws.
//   warm-up  warmup_iterations() calls, untimed.
//   timed    timed_iterations() calls, each timed on every rank; the
//            per-iteration maximum over ranks then gives time_us.
// One buffer of the largest size is allocated and touched before anything is
// timed (page faults cost ~12 us per page here), and each size uses a prefix
// of it.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "meshtrain/comm/bench/bench_report.hpp"
#include "meshtrain/comm/group/process_group.hpp"

namespace meshtrain::comm::bench {

struct AllReduceBenchOptions {
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::Ring;
  std::string algo_name = "ring";  // as the user asked ("auto" stays "auto")
  std::vector<size_t> sizes;       // bytes, each a multiple of 4 (fp32 elements)
  int iters = 40;                  // timed calls up to 8 MiB (see timed_iterations)
  bool check = false;
  int reducers = 0;                // for the report
};

// Collective over `group`; `report` is called on group rank 0 once per size.
// Throws Error when a check fails (naming the rank, size and element).
void run_all_reduce_bench(ProcessGroup& group, const AllReduceBenchOptions& options,
                          const std::function<void(const BenchResult&)>& report);

// The value rank r contributes at element i under --check, and the exact sum
// over n ranks (small integers: exact in fp32 whatever the order).
inline float check_input(int rank, size_t i) { return float((rank + 1) * int(i % 251 + 1)); }
inline float check_sum(int n, size_t i) { return float(n * (n + 1) / 2 * int(i % 251 + 1)); }

}  // namespace meshtrain::comm::bench
