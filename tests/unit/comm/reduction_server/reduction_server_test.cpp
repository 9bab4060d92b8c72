// The Reduction Server over threads as ranks (inproc transport): workers
// 0..n-1 and reducers n..n+R-1 share one world.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "meshtrain/comm/reduction_server/reducer.hpp"
#include "meshtrain/comm/reduction_server/worker.hpp"
#include "meshtrain/comm/transport/inproc/inproc_transport.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::reduction_server {
namespace {

using namespace std::chrono_literals;

struct Job {
  Job(int workers, int reducers, std::chrono::milliseconds timeout = 10s) {
    InprocOptions options;
    options.transport.timeout = timeout;
    options.queue_capacity_bytes = 64 << 10;
    transports = make_inproc_transports(workers + reducers, options);
    for (int w = 0; w < workers; ++w) worker_ranks.push_back(w);
    for (int r = 0; r < reducers; ++r) reducer_ranks.push_back(workers + r);
  }
  Topology topology(size_t chunk_bytes, int in_flight = Topology{}.in_flight) const {
    return {worker_ranks, reducer_ranks, chunk_bytes, in_flight};
  }
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<int> worker_ranks, reducer_ranks;
};

// Runs `work(w)` on each worker thread and serve() on each reducer thread;
// returns the error message of each rank ("" when it succeeded).
std::vector<std::string> run(Job& job, size_t chunk_bytes, const std::function<void(int, Transport&, const Topology&)>& work,
                             int in_flight = Topology{}.in_flight) {
  const Topology topo = job.topology(chunk_bytes, in_flight);
  std::vector<std::string> errors(job.transports.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < job.transports.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        if (r < job.worker_ranks.size()) {
          work(int(r), *job.transports[r], topo);
          shutdown(*job.transports[r], topo);
        } else {
          serve(*job.transports[r], topo);
        }
      } catch (const CommError& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

std::vector<float> input(int worker, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = float((worker + 1) * 0.37 + double(i % 97) / 7.0);
  return v;
}

class ReductionServer : public ::testing::TestWithParam<std::tuple<int, int, size_t>> {};

// Contributions added in worker order, as the reducer does.
std::vector<float> worker_order_sum(int workers, size_t count) {
  std::vector<float> sum = input(0, count);
  for (int w = 1; w < workers; ++w) {
    const std::vector<float> x = input(w, count);
    for (size_t i = 0; i < count; ++i) sum[i] += x[i];
  }
  return sum;
}

TEST_P(ReductionServer, SumMatchesWorkerOrderReferenceBitwise) {
  auto [workers, reducers, count] = GetParam();
  Job job(workers, reducers);
  std::vector<std::vector<float>> data(static_cast<size_t>(workers));
  const std::vector<float> expected = worker_order_sum(workers, count);

  auto errors = run(job, 4 << 10, [&](int w, Transport& t, const Topology& topo) {
    for (uint64_t seq = 0; seq < 2; ++seq) {  // twice: the reducer state is reused
      std::vector<float> buf = input(w, count);
      all_reduce(t, topo, Buffer(buf), ReduceKind::Sum, seq);
      data[size_t(w)] = buf;
    }
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  for (int w = 0; w < workers; ++w)
    ASSERT_EQ(data[size_t(w)], expected) << "worker " << w;  // float ==: exact, and these sums are never NaN
}

INSTANTIATE_TEST_SUITE_P(Shapes, ReductionServer,
                         ::testing::Values(std::make_tuple(1, 1, size_t(10)), std::make_tuple(2, 1, size_t(1000)),
                                           std::make_tuple(4, 4, size_t(100003)), std::make_tuple(3, 2, size_t(5)),
                                           std::make_tuple(4, 2, size_t(0)), std::make_tuple(2, 4, size_t(3)),
                                           std::make_tuple(5, 3, size_t(4099))));

// Chunks in flight change when sums come back, never what they are: every
// depth, with segments of 1, a few and many chunks, gives the same bits.
TEST(ReductionServerInFlight, EveryDepthGivesTheWorkerOrderSum) {
  constexpr int kWorkers = 4, kReducers = 3;
  for (const size_t count : {size_t(100), size_t(700), size_t(20011)})
    for (int depth = 1; depth <= 4; ++depth) {
      Job job(kWorkers, kReducers);
      std::vector<std::vector<float>> data(kWorkers);
      auto errors = run(
          job, 256,
          [&](int w, Transport& t, const Topology& topo) {
            data[size_t(w)] = input(w, count);
            all_reduce(t, topo, Buffer(data[size_t(w)]), ReduceKind::Sum, 0);
          },
          depth);
      for (const auto& e : errors) EXPECT_EQ(e, "") << count << " elements, " << depth << " in flight";
      const std::vector<float> expected = worker_order_sum(kWorkers, count);
      for (int w = 0; w < kWorkers; ++w)
        ASSERT_EQ(data[size_t(w)], expected) << "worker " << w << ", " << count << " elements, " << depth << " in flight";
    }
}

TEST(ReductionServerOps, AverageMaxAndIntegers) {
  Job job(3, 2);
  std::vector<double> avg(3);
  std::vector<std::vector<int64_t>> ints(3);
  std::vector<std::vector<float>> maxes(3);
  auto errors = run(job, 64, [&](int w, Transport& t, const Topology& topo) {
    std::vector<double> a(17, double(w + 1));
    all_reduce(t, topo, Buffer(a), ReduceKind::Avg, 0);
    avg[size_t(w)] = a[16];
    ints[size_t(w)].assign(33, int64_t(1) << (40 + w));
    all_reduce(t, topo, Buffer(ints[size_t(w)]), ReduceKind::Sum, 1);
    maxes[size_t(w)].assign(9, float(w * 10));
    maxes[size_t(w)][size_t(w)] = 100.0f;
    all_reduce(t, topo, Buffer(maxes[size_t(w)]), ReduceKind::Max, 2);
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  for (int w = 0; w < 3; ++w) {
    EXPECT_EQ(avg[size_t(w)], 2.0);
    EXPECT_EQ(ints[size_t(w)][32], (int64_t(1) << 40) + (int64_t(1) << 41) + (int64_t(1) << 42));
    EXPECT_EQ(maxes[size_t(w)][0], 100.0f);
    EXPECT_EQ(maxes[size_t(w)][8], 20.0f);
  }
}

TEST(ReductionServerErrors, WorkersThatDisagreeOnSizeAreNamed) {
  Job job(2, 1, 500ms);
  auto errors = run(job, 1 << 10, [&](int w, Transport& t, const Topology& topo) {
    std::vector<float> buf(w == 0 ? 100 : 101, 1.0f);
    all_reduce(t, topo, Buffer(buf), ReduceKind::Sum, 0);
  });
  // The reducer names both workers and both sizes; the workers fail too, never hang.
  EXPECT_NE(errors[2].find("workers disagree"), std::string::npos) << errors[2];
  EXPECT_NE(errors[2].find("100 f32"), std::string::npos) << errors[2];
  EXPECT_NE(errors[2].find("101 f32"), std::string::npos) << errors[2];
  EXPECT_NE(errors[0], "");
  EXPECT_NE(errors[1], "");
}

// The depth decides which exchange carries which sum: workers that disagree
// on it would pair the wrong messages, so the reducer refuses, naming both.
TEST(ReductionServerErrors, WorkersThatDisagreeOnChunksInFlightAreNamed) {
  Job job(2, 1, 500ms);
  auto errors = run(job, 64, [&](int w, Transport& t, const Topology& topo) {
    Topology mine = topo;
    mine.in_flight = w == 0 ? 1 : 3;
    std::vector<float> buf(100, 1.0f);
    all_reduce(t, mine, Buffer(buf), ReduceKind::Sum, 0);
  });
  EXPECT_NE(errors[2].find("workers disagree"), std::string::npos) << errors[2];
  EXPECT_NE(errors[2].find("1 in flight"), std::string::npos) << errors[2];
  EXPECT_NE(errors[2].find("3 in flight"), std::string::npos) << errors[2];
  EXPECT_NE(errors[0], "");
  EXPECT_NE(errors[1], "");
}

}  // namespace
}  // namespace meshtrain::comm::reduction_server
