// Loopback bandwidth between two ranks, 1-64 MiB. Disabled by default (it
// measures, it does not check); run it with
//   unit_comm --gtest_also_run_disabled_tests --gtest_filter='*TcpBandwidth*'
#include <gtest/gtest.h>

#include <cstdio>

#include "tcp_test_util.hpp"

namespace meshtrain::comm::tcp_test {
namespace {

TEST(TcpBandwidth, DISABLED_LoopbackTwoRanks) {
  std::printf("%10s %14s %14s %14s\n", "size", "one-way GB/s", "both-ways GB/s", "reduce GB/s");
  for (size_t mib = 1; mib <= 64; mib *= 2) {
    const size_t bytes = mib << 20;
    double results[3] = {};
    run_ranks(2, [&](int rank, Transport& t) {
      const int peer = 1 - rank;
      std::vector<float> mine(bytes / 4, 1.0f), got(bytes / 4, 0.0f);
      const Reduction sum{DataType::F32, ReduceOp::Sum};
      const int iters = static_cast<int>(std::max<size_t>(3, (512u << 20) / bytes));
      for (int mode = 0; mode < 3; ++mode) {
        auto once = [&] {
          const SendOp send{peer, mine.data(), bytes};
          const RecvOp recv{peer, got.data(), bytes, mode == 2 ? &sum : nullptr};
          if (mode == 1) return t.exchange({&send, 1}, {&recv, 1});
          if (rank == 0) t.exchange({&send, 1}, {});
          else t.exchange({}, {&recv, 1});
          t.exchange({}, {});
        };
        once();  // warm up
        char ack = 0;
        if (rank == 0) t.recv(1, &ack, 1); else t.send(0, &ack, 1);  // start together
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i) once();
        if (rank == 1) t.send(0, &ack, 1); else t.recv(1, &ack, 1);  // the receiver has everything
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (rank == 0) results[mode] = static_cast<double>(bytes) * iters / s / 1e9;
      }
    });
    std::printf("%7zu MiB %14.2f %14.2f %14.2f\n", mib, results[0], results[1], results[2]);
  }
}

}  // namespace
}  // namespace meshtrain::comm::tcp_test
