// reduce_scatter_in_place (ZeRO's gradient reduce-scatter over its staging
// buffer) against reduce_scatter: the same bits for Sum and Avg, odd counts
// over several pipeline chunks, groups of 1-4 ranks on the inproc transport,
// with the output aliasing the rank's segment of the data or not, and over
// a subgroup whose ranks are not the world's.
#include <cstring>
#include <stdexcept>
#include <string>

#include "harness.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::testing {
namespace {

TransportFactory inproc_factory() {
  for (auto& f : transport_factories())
    if (f.name == "inproc") return f;
  throw std::runtime_error("no inproc transport factory");
}

// Per-rank counts: empty, tiny, odd, and odd over several 8 KiB chunks.
const size_t kCounts[] = {0, 1, 3, 1001, 12501};

template <class T>
bool same_bits(const T* a, const T* b, size_t n) {
  return n == 0 || std::memcmp(a, b, n * sizeof(T)) == 0;
}

// Runs reduce_scatter and reduce_scatter_in_place (output aliasing data's
// segment r, or a separate buffer) on `groups` (group rank = index) and
// checks both against the ring reference, bitwise.
template <class T>
void check(const std::vector<ProcessGroup*>& groups, ReduceKind op, size_t count) {
  const int n = int(groups.size());
  SCOPED_TRACE(std::string(reduce_kind_name(op)) + " " + std::to_string(count) + " x " +
               std::string(dtype_name(dtype_of<T>())) + " per rank, group of " + std::to_string(n));
  const auto x = make_inputs<T>(n, count * size_t(n), int(count));
  const std::vector<T> zeros(count);
  std::vector<std::vector<T>> out(static_cast<size_t>(n), zeros), separate = out, aliased = x, work = x;
  std::vector<WorkHandle> works;
  for (int r = 0; r < n; ++r) works.push_back(groups[size_t(r)]->reduce_scatter_async(x[size_t(r)], out[size_t(r)], op));
  for (auto& w : works) w->wait();
  works.clear();
  for (int r = 0; r < n; ++r)
    works.push_back(groups[size_t(r)]->reduce_scatter_in_place_async(work[size_t(r)], separate[size_t(r)], op));
  for (auto& w : works) w->wait();
  works.clear();
  for (int r = 0; r < n; ++r) {
    T* mine = aliased[size_t(r)].data() + size_t(r) * count;
    works.push_back(groups[size_t(r)]->reduce_scatter_in_place_async(aliased[size_t(r)], Buffer(mine, count, dtype_of<T>()), op));
  }
  for (auto& w : works) w->wait();
  for (int r = 0; r < n; ++r) {
    const T* in_place = aliased[size_t(r)].data() + size_t(r) * count;
    ASSERT_TRUE(same_bits(separate[size_t(r)].data(), out[size_t(r)].data(), count)) << "rank " << r << ", separate output";
    ASSERT_TRUE(same_bits(in_place, out[size_t(r)].data(), count)) << "rank " << r << ", output aliasing its segment";
    for (size_t i = 0; i < count; ++i) {
      const T want = ring_reference(x, r, size_t(r) * count + i, op);
      ASSERT_EQ(std::memcmp(&out[size_t(r)][i], &want, sizeof(T)), 0) << "rank " << r << " element " << i;
    }
  }
}

class ReduceScatterInPlace : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { world_ = std::make_unique<World>(inproc_factory(), GetParam()); }
  std::vector<ProcessGroup*> all() {
    std::vector<ProcessGroup*> g;
    for (auto& group : world_->groups) g.push_back(&group);
    return g;
  }
  std::unique_ptr<World> world_;
};

TEST_P(ReduceScatterInPlace, MatchesReduceScatterBitwise) {
  for (size_t count : kCounts)
    for (ReduceKind op : {ReduceKind::Sum, ReduceKind::Avg}) {
      check<float>(all(), op, count);
      check<double>(all(), op, count / 3);
      if (HasFatalFailure()) return;
    }
}

TEST_P(ReduceScatterInPlace, SizesThatDoNotFitThrow) {
  const int n = GetParam();
  std::vector<float> data(size_t(n) * 10 + 1), out(10);
  EXPECT_THROW(world_->groups[0].reduce_scatter_in_place_async(data, out), CommError);
  std::vector<double> wrong_type(10);
  std::vector<float> fits(size_t(n) * 10);
  EXPECT_THROW(world_->groups[0].reduce_scatter_in_place_async(fits, wrong_type), CommError);
}

INSTANTIATE_TEST_SUITE_P(Inproc, ReduceScatterInPlace, ::testing::Range(1, 5),
                         [](const ::testing::TestParamInfo<int>& info) { return "n" + std::to_string(info.param); });

TEST(ReduceScatterInPlaceSubgroup, GroupRanksInMemberOrder) {
  // World of 4; the group is global ranks {3, 1}: group rank 0 is global 3.
  World world(inproc_factory(), 4);
  ProcessGroup g3(world.comms[3], {3, 1}), g1(world.comms[1], {3, 1});
  ASSERT_EQ(g3.rank(), 0);
  ASSERT_EQ(g1.rank(), 1);
  for (size_t count : kCounts)
    for (ReduceKind op : {ReduceKind::Sum, ReduceKind::Avg}) {
      check<float>({&g3, &g1}, op, count);
      if (::testing::Test::HasFatalFailure()) return;
    }
}

}  // namespace
}  // namespace meshtrain::comm::testing
