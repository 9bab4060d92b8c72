// Reference: single-thread memcpy bandwidth between two buffers allocated and
// touched once, per size (a ceiling for one copy per byte, which is what a
// shared-memory transport pays at least). Same JSON fields: algbw = bytes/time.
//   bench_memcpy --sizes 256M:256M
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "peer_args.hpp"

int main(int argc, char** argv) {
  namespace mb = meshtrain::comm::bench;
  const peer::Args args = peer::parse_args(argc, argv);
  size_t largest = 0;
  for (size_t s : args.sizes) largest = std::max(largest, s);
  std::vector<char> src(largest, 1), dst(largest, 0);
  for (size_t bytes : args.sizes) {
    for (int i = 0; i < mb::warmup_iterations(bytes, args.iters); ++i) std::memcpy(dst.data(), src.data(), bytes);
    std::vector<double> seconds(size_t(mb::timed_iterations(bytes, args.iters)));
    for (double& s : seconds) {
      const auto start = std::chrono::steady_clock::now();
      std::memcpy(dst.data(), src.data(), bytes);
      s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    mb::BenchResult r;
    r.collective = "memcpy";
    r.algo = "memcpy";
    r.transport = "local";
    r.bytes = bytes;
    mb::finish_all_reduce(r, seconds);  // nproc 1: busbw 0; algbw is the figure
    std::printf("%s\n", mb::to_json(r).c_str());
  }
  return dst[largest / 2] == 1 ? 0 : 1;
}
