// Process groups and communicators: asynchronous handles, FIFO order,
// failures that become CommErrors on every rank (never hangs), mismatched
// counts, arguments outside the group, and sub-groups.
#include <cmath>
#include <thread>

#include "../collectives/harness.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::testing {
namespace {

const TransportFactory& inproc() {
  static const TransportFactory factory = transport_factories().front();
  return factory;
}

// Waits on every handle; returns the CommError messages (empty string: success).
std::vector<std::string> outcomes(const std::vector<WorkHandle>& works) {
  std::vector<std::string> out;
  for (const auto& w : works) {
    try {
      w->wait();
      out.emplace_back();
    } catch (const CommError& e) {
      out.emplace_back(e.what());
    }
  }
  return out;
}

TEST(ProcessGroupTest, AsyncAllReduceOverlapsWithWork) {
  World world(inproc(), 4);
  const size_t count = 1 << 20;
  auto x = make_inputs<int32_t>(4, count);
  std::vector<WorkHandle> works;
  for (int r = 0; r < 4; ++r) works.push_back(world.groups[size_t(r)].all_reduce_async(x[size_t(r)]));
  double busy = 0;  // the test thread computes while the communicators reduce
  for (int i = 1; i < 2000000; ++i) busy += std::sqrt(double(i));
  EXPECT_GT(busy, 0);
  for (auto& w : works) w->wait();
  for (auto& w : works) EXPECT_TRUE(w->is_completed());
  for (size_t i = 0; i < count; i += 4099) {
    int32_t want = 0;
    for (int r = 0; r < 4; ++r) want += input_value<int32_t>(r, i);
    ASSERT_EQ(x[0][i], want);
    ASSERT_EQ(x[3][i], want);
  }
}

TEST(ProcessGroupTest, OperationsRunInSubmissionOrder) {
  World world(inproc(), 3);
  std::vector<std::vector<int64_t>> a(3, std::vector<int64_t>(5000, 1)), b(3, std::vector<int64_t>(7, 2));
  std::vector<WorkHandle> first, last;
  for (int r = 0; r < 3; ++r) {
    first.push_back(world.groups[size_t(r)].all_reduce_async(a[size_t(r)], ReduceKind::Sum, AllReduceAlgorithm::Ring));
    last.push_back(world.groups[size_t(r)].all_reduce_async(b[size_t(r)], ReduceKind::Max, AllReduceAlgorithm::Tree));
  }
  for (auto& w : last) w->wait();
  for (auto& w : first) EXPECT_TRUE(w->is_completed());  // FIFO: the earlier op finished first
  EXPECT_EQ(a[2][4999], 3);
  EXPECT_EQ(b[1][6], 2);
}

// A blocking call runs on the calling thread only when the communicator is
// idle; behind queued work it waits its turn, so the order still holds.
TEST(ProcessGroupTest, BlockingCallsKeepTheOrderBehindQueuedWork) {
  World world(inproc(), 3);
  std::vector<std::vector<int64_t>> a(3, std::vector<int64_t>(200000, 1)), b(3, std::vector<int64_t>(7, 2));
  std::vector<std::thread> ranks;
  std::vector<char> first_done(3, 0);  // not vector<bool>: its bits share a word, and ranks write at once
  for (int r = 0; r < 3; ++r)
    ranks.emplace_back([&, r] {
      auto& g = world.groups[size_t(r)];
      WorkHandle first = g.all_reduce_async(a[size_t(r)], ReduceKind::Sum, AllReduceAlgorithm::Ring);
      g.all_reduce(b[size_t(r)], ReduceKind::Sum);  // queued behind `first`, or inline once it is done
      first_done[size_t(r)] = first->is_completed();
      g.barrier();  // idle now: runs on this thread
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(first_done[size_t(r)]) << r;
    EXPECT_EQ(a[size_t(r)][199999], 3);
    EXPECT_EQ(b[size_t(r)][6], 6);
  }
}

TEST(ProcessGroupTest, RankThatLeavesFailsTheOthers) {
  World world(inproc(), 4, 10s);
  world.groups.pop_back();
  world.comms.pop_back();  // rank 3 goes away: its transport closes
  std::vector<std::vector<float>> x(3, std::vector<float>(1000, 1.0f));
  const auto start = std::chrono::steady_clock::now();
  std::vector<WorkHandle> works;
  for (int r = 0; r < 3; ++r) works.push_back(world.groups[size_t(r)].all_reduce_async(x[size_t(r)]));
  const auto errors = outcomes(works);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "should fail at once, not at the timeout";
  for (const auto& e : errors) EXPECT_NE(e, "") << "every rank must fail";
  bool named = false;
  for (const auto& e : errors) named |= e.find("rank 3") != std::string::npos;
  EXPECT_TRUE(named) << errors[0];
}

TEST(ProcessGroupTest, RankThatThrowsFailsTheOthersAndBreaksItsCommunicator) {
  World world(inproc(), 3, 10s);
  std::vector<std::vector<double>> x(3, std::vector<double>(100, 1.0));
  std::vector<WorkHandle> works;
  works.push_back(world.groups[0].all_reduce_async(x[0]));
  works.push_back(world.groups[1].all_reduce_async(x[1]));
  works.push_back(world.comms[2]->submit("fault", [](Transport&) { throw CommError("simulated fault"); }));
  const auto errors = outcomes(works);
  for (const auto& e : errors) EXPECT_NE(e, "");
  EXPECT_NE(errors[2].find("simulated fault"), std::string::npos) << errors[2];
  EXPECT_TRUE(world.comms[2]->broken());
  try {
    world.groups[2].barrier();
    FAIL() << "a broken communicator must refuse work";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("broken"), std::string::npos) << e.what();
  }
}

TEST(ProcessGroupTest, SilentRankTimesOutNamingPeers) {
  World world(inproc(), 3, 200ms);
  std::vector<std::vector<float>> x(3, std::vector<float>(10, 1.0f));
  std::vector<WorkHandle> works;
  for (int r = 0; r < 2; ++r) works.push_back(world.groups[size_t(r)].all_reduce_async(x[size_t(r)]));
  const auto errors = outcomes(works);  // rank 2 never joins
  bool timed_out = false;
  for (const auto& e : errors) {
    EXPECT_NE(e, "");
    timed_out |= e.find("timed out") != std::string::npos && e.find("rank") != std::string::npos;
  }
  EXPECT_TRUE(timed_out) << errors[0] << "\n" << errors[1];
}

TEST(ProcessGroupTest, MismatchedCountsAreDetected) {
  for (AllReduceAlgorithm algorithm :
       {AllReduceAlgorithm::Ring, AllReduceAlgorithm::Tree, AllReduceAlgorithm::HalvingDoubling,
        AllReduceAlgorithm::RecursiveDoubling}) {
    SCOPED_TRACE(algorithm_name(algorithm));
    World world(inproc(), 3, 2s);
    std::vector<std::vector<float>> x{std::vector<float>(10), std::vector<float>(11), std::vector<float>(11)};
    std::vector<WorkHandle> works;
    for (int r = 0; r < 3; ++r)
      works.push_back(world.groups[size_t(r)].all_reduce_async(x[size_t(r)], ReduceKind::Sum, algorithm));
    const auto errors = outcomes(works);
    bool mismatch = false;
    for (const auto& e : errors) {
      EXPECT_NE(e, "");
      mismatch |= e.find("mismatched") != std::string::npos;
    }
    EXPECT_TRUE(mismatch) << errors[0];
  }
}

TEST(ProcessGroupTest, RanksOutsideTheGroupAreRejected) {
  World world(inproc(), 4);
  auto expect_error = [](auto&& make, const std::string& needle) {
    try {
      make();
      ADD_FAILURE() << "expected a CommError containing '" << needle << "'";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([&] { ProcessGroup(world.comms[0], {1, 2}); }, "not a member");
  expect_error([&] { ProcessGroup(world.comms[0], {0, 4}); }, "outside the world");
  expect_error([&] { ProcessGroup(world.comms[0], {0, 1, 0}); }, "twice");
  std::vector<float> v(8), w(3);
  ProcessGroup& g = world.groups[0];
  expect_error([&] { g.broadcast_async(v, 4); }, "root 4 is outside the group of 4");
  expect_error([&] { g.reduce_async(v, -1); }, "outside the group");
  expect_error([&] { g.send_async(v, 0); }, "itself");
  expect_error([&] { g.recv_async(v, 7); }, "outside the group");
  expect_error([&] { g.reduce_scatter_async(v, w); }, "4 ranks x output 3 x f32");
  expect_error([&] { g.all_gather_async(w, v); }, "must be 4 ranks");
  EXPECT_FALSE(world.comms[0]->broken()) << "a rejected call must not touch the communicator";
}

TEST(ProcessGroupTest, SubGroupsTranslateRanks) {
  World world(inproc(), 6);
  // Evens and odds reduce at once; the odd group lists its members backwards,
  // so its group rank 0 is global rank 5.
  std::vector<ProcessGroup> sub;
  for (int r = 0; r < 6; ++r)
    sub.emplace_back(world.comms[size_t(r)], r % 2 == 0 ? std::vector<int>{0, 2, 4} : std::vector<int>{5, 3, 1});
  EXPECT_EQ(sub[5].rank(), 0);
  EXPECT_EQ(sub[1].rank(), 2);
  EXPECT_EQ(sub[1].global_rank(0), 5);
  std::vector<std::vector<int64_t>> x(6);
  for (int r = 0; r < 6; ++r) x[size_t(r)].assign(1001, r);
  world.run([&](int r) { return sub[size_t(r)].all_reduce_async(x[size_t(r)]); });
  for (int r = 0; r < 6; ++r) EXPECT_EQ(x[size_t(r)][1000], r % 2 == 0 ? 0 + 2 + 4 : 1 + 3 + 5) << r;
  for (int r = 0; r < 6; ++r) x[size_t(r)].assign(5, r);
  world.run([&](int r) { return sub[size_t(r)].broadcast_async(x[size_t(r)], 0); });
  for (int r = 0; r < 6; ++r) EXPECT_EQ(x[size_t(r)][4], r % 2 == 0 ? 0 : 5) << r;
}

}  // namespace
}  // namespace meshtrain::comm::testing
