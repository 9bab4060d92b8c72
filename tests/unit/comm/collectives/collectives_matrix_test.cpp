// reduce_scatter, all_gather, broadcast, reduce, all_to_all(_v), barrier and
// send/recv over every world size 1..8 x count, against serial references
// (bitwise: reduce_scatter adds in ring order, reduce in tree order).
#include <numeric>
#include <thread>

#include "harness.hpp"

namespace meshtrain::comm::testing {
namespace {

class CollectivesMatrix : public ::testing::TestWithParam<std::tuple<TransportFactory, int>> {
 protected:
  void SetUp() override {
    world_ = std::make_unique<World>(std::get<0>(GetParam()), std::get<1>(GetParam()));
    if (world_->size() == 0) GTEST_SKIP() << "mpirun started a world of another size";
  }
  int n() const { return world_->size(); }
  ProcessGroup& group(int r) { return world_->groups[size_t(r)]; }
  std::unique_ptr<World> world_;
};

std::string trace(const char* what, size_t count, DataType dtype, int n) {
  return std::string(what) + " " + std::to_string(count) + " x " + std::string(dtype_name(dtype)) +
         " n=" + std::to_string(n);
}

template <class T>
void check_reduce_scatter(World& world, ReduceKind op, size_t count, bool in_place) {
  const int n = world.size();
  SCOPED_TRACE(trace(in_place ? "reduce_scatter in place" : "reduce_scatter", count, dtype_of<T>(), n) + " " +
               std::string(reduce_kind_name(op)));
  const auto x = make_inputs<T>(n, count * size_t(n));
  auto io = x;  // in place: each rank's output is segment r of its own input
  std::vector<std::vector<T>> out(static_cast<size_t>(n), std::vector<T>(count));
  world.run([&](int r) {
    const ConstBuffer input(io[size_t(r)]);
    const Buffer output = in_place ? Buffer(io[size_t(r)].data() + size_t(r) * count, count, dtype_of<T>())
                                   : Buffer(out[size_t(r)]);
    return world.groups[size_t(r)].reduce_scatter_async(input, output, op);
  });
  for (int r = 0; r < n; ++r) {
    Mismatches wrong;
    for (size_t i = 0; i < count && world.local(r); ++i) {
      const size_t at = size_t(r) * count + i;
      const T got = in_place ? io[size_t(r)][at] : out[size_t(r)][i];
      wrong.note(same_bits(got, ring_reference(x, r, at, op)), i);
    }
    ASSERT_EQ(wrong.count, 0u) << "rank " << r << ", first wrong element " << wrong.first;
  }
}

template <class T>
void check_all_gather(World& world, size_t count, bool in_place) {
  const int n = world.size();
  SCOPED_TRACE(trace(in_place ? "all_gather in place" : "all_gather", count, dtype_of<T>(), n));
  const auto x = make_inputs<T>(n, count);
  std::vector<T> want;
  for (auto& part : x) want.insert(want.end(), part.begin(), part.end());
  std::vector<std::vector<T>> out(static_cast<size_t>(n), std::vector<T>(count * size_t(n)));
  if (in_place)
    for (int r = 0; r < n; ++r) std::copy(x[size_t(r)].begin(), x[size_t(r)].end(), out[size_t(r)].begin() + long(size_t(r) * count));
  world.run([&](int r) {
    const ConstBuffer input = in_place ? ConstBuffer(out[size_t(r)].data() + size_t(r) * count, count, dtype_of<T>())
                                       : ConstBuffer(x[size_t(r)]);
    return world.groups[size_t(r)].all_gather_async(input, out[size_t(r)]);
  });
  for (int r = 0; r < n; ++r)
    if (world.local(r)) {
      ASSERT_TRUE(bitwise_equal(out[size_t(r)], want)) << "rank " << r;
    }
}

template <class T>
void check_broadcast(World& world, size_t count, int root) {
  const int n = world.size();
  SCOPED_TRACE(trace("broadcast", count, dtype_of<T>(), n) + " root " + std::to_string(root));
  auto x = make_inputs<T>(n, count);
  const auto want = x[size_t(root)];
  world.run([&](int r) { return world.groups[size_t(r)].broadcast_async(x[size_t(r)], root); });
  for (int r = 0; r < n; ++r)
    if (world.local(r)) {
      ASSERT_TRUE(bitwise_equal(x[size_t(r)], want)) << "rank " << r;
    }
}

template <class T>
void check_reduce(World& world, ReduceKind op, size_t count, int root) {
  const int n = world.size();
  SCOPED_TRACE(trace("reduce", count, dtype_of<T>(), n) + " root " + std::to_string(root) + " " +
               std::string(reduce_kind_name(op)));
  const auto x = make_inputs<T>(n, count);
  auto y = x;
  world.run([&](int r) { return world.groups[size_t(r)].reduce_async(y[size_t(r)], root, op); });
  for (int r = 0; r < n; ++r) {
    if (r == root || !world.local(r)) continue;
    ASSERT_TRUE(bitwise_equal(y[size_t(r)], x[size_t(r)])) << "non-root rank " << r << " changed";
  }
  Mismatches wrong;
  for (size_t i = 0; i < count && world.local(root); ++i)
    wrong.note(same_bits(y[size_t(root)][i], tree_reference(x, root, i, op)), i);
  ASSERT_EQ(wrong.count, 0u) << "first wrong element " << wrong.first;
}

TEST_P(CollectivesMatrix, ReduceScatter) {
  for (size_t count : matrix_counts(n()))
    for (ReduceKind op : {ReduceKind::Sum, ReduceKind::Avg, ReduceKind::Max, ReduceKind::Min})
      for (bool in_place : {false, true}) {
        check_reduce_scatter<float>(*world_, op, count / 4 + (count & 1), in_place);
        check_reduce_scatter<double>(*world_, op, count / 4, in_place);
        check_reduce_scatter<int32_t>(*world_, op, count / 4, in_place);
        check_reduce_scatter<int64_t>(*world_, op, count / 4 + (count & 1), in_place);
        if (HasFatalFailure()) return;
      }
}

TEST_P(CollectivesMatrix, AllGather) {
  for (size_t count : matrix_counts(n()))
    for (bool in_place : {false, true}) {
      check_all_gather<float>(*world_, count / 2 + (count & 1), in_place);
      check_all_gather<int64_t>(*world_, count / 4, in_place);
      if (HasFatalFailure()) return;
    }
}

TEST_P(CollectivesMatrix, Broadcast) {
  for (size_t count : matrix_counts(n()))
    for (int root : {0, n() - 1, n() / 2}) {
      check_broadcast<float>(*world_, count, root);
      check_broadcast<int32_t>(*world_, count, root);
      if (HasFatalFailure()) return;
    }
}

TEST_P(CollectivesMatrix, Reduce) {
  for (size_t count : matrix_counts(n()))
    for (ReduceKind op : {ReduceKind::Sum, ReduceKind::Avg, ReduceKind::Max, ReduceKind::Min}) {
      const int root = int(count % size_t(n()));
      check_reduce<float>(*world_, op, count, root);
      check_reduce<double>(*world_, op, count, root);
      check_reduce<int32_t>(*world_, op, count, root);
      check_reduce<int64_t>(*world_, op, count, root);
      if (HasFatalFailure()) return;
    }
}

TEST_P(CollectivesMatrix, AllToAll) {
  for (size_t block : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{12501}}) {
    SCOPED_TRACE("block " + std::to_string(block));
    const auto x = make_inputs<float>(n(), block * size_t(n()));
    std::vector<std::vector<float>> y(static_cast<size_t>(n()), std::vector<float>(block * size_t(n())));
    world_->run([&](int r) { return group(r).all_to_all_async(x[size_t(r)], y[size_t(r)]); });
    for (int j = 0; j < n(); ++j)
      for (int i = 0; i < n() && world_->local(j); ++i)
        ASSERT_EQ(block == 0 ? 0 : std::memcmp(y[size_t(j)].data() + size_t(i) * block, x[size_t(i)].data() + size_t(j) * block, block * 4), 0)
            << "block from " << i << " at " << j;
  }
}

TEST_P(CollectivesMatrix, AllToAllV) {
  for (size_t scale : {size_t{0}, size_t{1}, size_t{333}}) {
    SCOPED_TRACE("scale " + std::to_string(scale));
    // counts[i][j]: elements rank i sends to rank j, some of them zero.
    auto counts = [&](int i, int j) { return size_t((i * 7 + j * 3) % 5) * scale; };
    std::vector<std::vector<int64_t>> in(static_cast<size_t>(n())), out(static_cast<size_t>(n()));
    std::vector<std::vector<size_t>> send(static_cast<size_t>(n())), recv(static_cast<size_t>(n()));
    for (int i = 0; i < n(); ++i)
      for (int j = 0; j < n(); ++j) {
        send[size_t(i)].push_back(counts(i, j));
        recv[size_t(i)].push_back(counts(j, i));
        for (size_t e = 0; e < counts(i, j); ++e) in[size_t(i)].push_back(int64_t(i) * 1000000 + j * 10000 + int64_t(e));
      }
    for (int j = 0; j < n(); ++j) out[size_t(j)].assign(std::accumulate(recv[size_t(j)].begin(), recv[size_t(j)].end(), size_t{0}), -1);
    world_->run([&](int r) {
      return group(r).all_to_all_v_async(in[size_t(r)], send[size_t(r)], out[size_t(r)], recv[size_t(r)]);
    });
    for (int j = 0; j < n(); ++j) {
      if (!world_->local(j)) continue;
      std::vector<int64_t> want;
      for (int i = 0; i < n(); ++i)
        for (size_t e = 0; e < counts(i, j); ++e) want.push_back(int64_t(i) * 1000000 + j * 10000 + int64_t(e));
      ASSERT_EQ(out[size_t(j)], want) << "rank " << j;
    }
  }
}

TEST_P(CollectivesMatrix, BarrierWaitsForTheLastRank) {
  std::vector<WorkHandle> works;
  for (int r = 0; r + 1 < n(); ++r)
    if (world_->local(r)) works.push_back(group(r).barrier_async());
  std::this_thread::sleep_for(30ms);
  for (auto& w : works) EXPECT_FALSE(w->is_completed());
  // The last rank's own process (mpi) waits longer than the others look.
  if (!world_->local(0)) std::this_thread::sleep_for(300ms);
  if (world_->local(n() - 1)) works.push_back(group(n() - 1).barrier_async());
  for (auto& w : works) w->wait();
}

TEST_P(CollectivesMatrix, SendRecvAroundTheRing) {
  if (n() == 1) GTEST_SKIP() << "no peer";
  const auto x = make_inputs<double>(n(), 1001);
  std::vector<std::vector<double>> y(static_cast<size_t>(n()), std::vector<double>(1001));
  std::vector<WorkHandle> works;
  // A rank's operations run one after another on its communicator thread,
  // and a large send may wait for its receive (MPI's rendezvous protocol):
  // even ranks send first, odd ranks receive first, as with blocking MPI.
  for (int r = 0; r < n(); ++r) {
    if (!world_->local(r)) continue;
    auto send = [&] { works.push_back(group(r).send_async(x[size_t(r)], (r + 1) % n())); };
    auto recv = [&] { works.push_back(group(r).recv_async(y[size_t(r)], (r - 1 + n()) % n())); };
    if (r % 2 == 0) send(), recv();
    else recv(), send();
  }
  for (auto& w : works) w->wait();
  for (int r = 0; r < n(); ++r)
    if (world_->local((r + 1) % n())) {
      EXPECT_EQ(y[size_t((r + 1) % n())], x[size_t(r)]);
    }
}

INSTANTIATE_TEST_SUITE_P(Collectives, CollectivesMatrix,
                         ::testing::Combine(::testing::ValuesIn(transport_factories()), ::testing::Range(1, 9)),
                         world_name);
INSTANTIATE_TEST_SUITE_P(SingleCopy, CollectivesMatrix,
                         ::testing::Combine(::testing::Values(shm_single_copy_factory()), ::testing::Values(2, 3, 5)),
                         world_name);

}  // namespace
}  // namespace meshtrain::comm::testing
