#pragma once
// Command line shared by the collective peer benchmarks:
//   --sizes LOW:HIGH  --iters K  --check  --nproc N  (N: Gloo only; MPI takes mpirun's)
// Results print as meshtrain's JSON lines (comm/bench/bench_report.hpp), with
// the same iteration schedule, so bench/collectives.sh compares like with like.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "meshtrain/comm/bench/bench_report.hpp"

namespace peer {

struct Args {
  std::vector<size_t> sizes = meshtrain::comm::bench::parse_size_range("4K:256M");
  int iters = 40;
  int nproc = 2;
  bool check = false;
};

inline Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--sizes" && has_value) a.sizes = meshtrain::comm::bench::parse_size_range(argv[++i]);
    else if (arg == "--iters" && has_value) a.iters = std::atoi(argv[++i]);
    else if (arg == "--nproc" && has_value) a.nproc = std::atoi(argv[++i]);
    else if (arg == "--check") a.check = true;
    else if (arg == "--json") continue;  // always JSON
    else {
      std::fprintf(stderr, "usage: %s [--sizes 4K:256M] [--iters K] [--nproc N] [--check]\n", argv[0]);
      std::exit(2);
    }
  }
  if (a.iters < 1 || a.nproc < 1) {
    std::fprintf(stderr, "%s: --iters and --nproc must be positive\n", argv[0]);
    std::exit(2);
  }
  return a;
}

// --check inputs: small integers, exact in fp32 in any order (as meshtrain's).
inline float check_input(int rank, size_t i) { return float((rank + 1) * int(i % 251 + 1)); }
inline float check_sum(int n, size_t i) { return float(n * (n + 1) / 2 * int(i % 251 + 1)); }

}  // namespace peer
