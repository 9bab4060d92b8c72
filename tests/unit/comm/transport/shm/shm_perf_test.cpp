// A quick throughput/latency check between forked processes. It asserts
// only correctness (speed depends on the machine) and prints its figures:
//   latency    4 KiB ping-pong, half the round trip;
//   stream     rank 0 -> rank 1, one direction;
//   allreduce  ring all-reduce (reduce-scatter + all-gather, f32 sum) over
//              exchange(), bus bandwidth = 2 (n-1)/n * bytes / time.
// MESHTRAIN_SHM_SLOT_BYTES / MESHTRAIN_SHM_SLOT_COUNT override the geometry.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "shm_test_util.hpp"

namespace meshtrain::comm {
namespace {

using namespace shm_test;
using Clock = std::chrono::steady_clock;

ShmOptions perf_options(const std::string& job, int rank, int world) {
  ShmOptions o = options(job, rank, world);
  if (const char* v = std::getenv("MESHTRAIN_SHM_SLOT_BYTES")) o.slot_bytes = std::strtoull(v, nullptr, 10);
  if (const char* v = std::getenv("MESHTRAIN_SHM_SLOT_COUNT")) o.slot_count = std::strtoull(v, nullptr, 10);
  return o;
}

double seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Best and median of per-iteration times (s): on a shared machine the best
// approximates the uncontended speed, the median what a busy host gives.
struct Times {
  std::vector<double> v;
  double best() { return *std::min_element(v.begin(), v.end()); }
  double median() {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
};

bool ping_pong_and_stream(const std::string& job, int rank) {
  auto t = connect_shm(perf_options(job, rank, 2));
  const int peer = 1 - rank;
  std::vector<uint8_t> small(4096);  // bytes
  constexpr int kIters = 2000;
  Times rtt;
  for (int i = -200; i < kIters; ++i) {  // 200 warm-up rounds
    const Clock::time_point t0 = Clock::now();
    if (rank == 0) {
      t->send(peer, small.data(), small.size());
      t->recv(peer, small.data(), small.size());
    } else {
      t->recv(peer, small.data(), small.size());
      t->send(peer, small.data(), small.size());
    }
    if (i >= 0) rtt.v.push_back(seconds(t0));
  }
  if (rank == 0) {
    std::printf("[shm perf] 4 KiB one-way latency: best %.2f us, median %.2f us\n", rtt.best() / 2 * 1e6,
                rtt.median() / 2 * 1e6);
  }

  std::vector<uint8_t> big(64u << 20);
  fill(big, 5);  // also pre-faults
  for (size_t mib : {1, 4, 16, 64}) {
    const size_t bytes = mib << 20;
    const int iters = int(std::max<size_t>(4, (256u << 20) / bytes));
    Times times;  // the receiver's clock is the one that counts
    for (int i = -1; i < iters; ++i) {
      const Clock::time_point t0 = Clock::now();
      if (rank == 0) t->send(peer, big.data(), bytes); else t->recv(peer, big.data(), bytes);
      if (i >= 0) times.v.push_back(seconds(t0));
    }
    uint8_t ack = 0;
    if (rank == 1) {
      std::printf("[shm perf] stream %2zu MiB: best %.2f GB/s, median %.2f GB/s\n", mib,
                  double(bytes) / times.best() / 1e9, double(bytes) / times.median() / 1e9);
      t->send(peer, &ack, 1);
    } else {
      t->recv(peer, &ack, 1);
    }
  }
  return rank == 0 || matches(big, 5);
}

TEST(ShmPerf, PingPongAndStream) {
  const std::string job = unique_job_id("perf");
  EXPECT_EQ(run_processes(2, [&](int r) { return ping_pong_and_stream(job, r); }), std::vector<int>({0, 0}));
}

// In-place ring all-reduce of `data` (n floats) over `world` ranks.
void ring_allreduce(Transport& t, float* data, size_t n) {
  const int world = t.size(), rank = t.rank();
  const int right = (rank + 1) % world, left = (rank + world - 1) % world;
  auto begin = [&](int seg) { return n * size_t(seg) / size_t(world); };  // element index
  auto bytes = [&](int seg) { return (begin(seg + 1) - begin(seg)) * sizeof(float); };
  const Reduction sum{DataType::F32, ReduceOp::Sum};
  for (int step = 0; step < 2 * (world - 1); ++step) {
    const bool scatter = step < world - 1;  // reduce-scatter, then all-gather
    const int s = scatter ? step : step - (world - 1);
    const int send_seg = ((scatter ? rank - s : rank + 1 - s) % world + world) % world;
    const int recv_seg = ((scatter ? rank - s - 1 : rank - s) % world + world) % world;
    SendOp send{right, data + begin(send_seg), bytes(send_seg)};
    RecvOp recv{left, data + begin(recv_seg), bytes(recv_seg), scatter ? &sum : nullptr};
    t.exchange({&send, 1}, {&recv, 1});
  }
}

bool allreduce_bench(const std::string& job, int rank, int world) {
  auto t = connect_shm(perf_options(job, rank, world));
  std::vector<float> data(16u << 20);  // (16 Mi) floats = 64 MiB, pre-faulted below
  for (size_t mib : {1, 4, 64}) {
    const size_t n = (mib << 20) / sizeof(float);
    // One checked run, then timed runs on zeros (0 + 0 stays 0: no refill).
    std::fill(data.begin(), data.begin() + n, float(rank + 1));
    ring_allreduce(*t, data.data(), n);
    const float want = float(world * (world + 1) / 2);
    for (size_t i = 0; i < n; i += 997) {
      if (data[i] != want) return false;
    }
    std::fill(data.begin(), data.begin() + n, 0.0f);
    const int iters = int(std::max<size_t>(4, (256u << 20) / (mib << 20)));
    Times times;
    for (int i = 0; i < iters; ++i) {
      const Clock::time_point t0 = Clock::now();
      ring_allreduce(*t, data.data(), n);
      times.v.push_back(seconds(t0));
    }
    const double bus_bytes = 2.0 * (world - 1) / world * double(mib << 20);
    if (rank == 0) {
      std::printf("[shm perf] allreduce %d ranks %2zu MiB: busbw best %.2f GB/s, median %.2f GB/s\n",
                  world, mib, bus_bytes / times.best() / 1e9, bus_bytes / times.median() / 1e9);
    }
  }
  return true;
}

TEST(ShmPerf, RingAllreduce2And4) {
  for (int world : {2, 4}) {
    const std::string job = unique_job_id("perf-ar");
    EXPECT_EQ(run_processes(world, [&](int r) { return allreduce_bench(job, r, world); }), std::vector<int>(world, 0));
  }
}

}  // namespace
}  // namespace meshtrain::comm
