// All-reduce over every algorithm x world size 1..8 x count x dtype x op,
// against serial references. Ring and tree are checked bitwise against a
// reference that adds in the algorithm's own order; halving-doubling and
// recursive doubling within a tolerance for float sums (exact for ints, max and min). Every rank must
// hold bitwise-identical results whatever the algorithm.
#include <cmath>

#include "harness.hpp"

namespace meshtrain::comm::testing {
namespace {

class AllReduceMatrix : public ::testing::TestWithParam<std::tuple<TransportFactory, int>> {
 protected:
  void SetUp() override {
    world_ = std::make_unique<World>(std::get<0>(GetParam()), std::get<1>(GetParam()));
    if (world_->size() == 0) GTEST_SKIP() << "mpirun started a world of another size";
  }
  void check_all(AllReduceAlgorithm algorithm);
  std::unique_ptr<World> world_;
};

template <class T>
void check_all_reduce(World& world, AllReduceAlgorithm algorithm, ReduceKind op, size_t count) {
  const int n = world.size();
  SCOPED_TRACE(std::string(algorithm_name(algorithm)) + " " + std::string(reduce_kind_name(op)) + " " +
               std::to_string(count) + " x " + std::string(dtype_name(dtype_of<T>())) + " n=" + std::to_string(n));
  const auto x = make_inputs<T>(n, count);
  auto y = x;
  world.run([&](int r) { return world.groups[size_t(r)].all_reduce_async(y[size_t(r)], op, algorithm); });
  const int first = world.first_local();
  for (int r = first + 1; r < n; ++r)
    if (world.local(r)) {
      ASSERT_TRUE(bitwise_equal(y[size_t(r)], y[size_t(first)])) << "rank " << r << " differs";
    }

  AllReduceAlgorithm concrete = algorithm;
  if (concrete == AllReduceAlgorithm::Auto) concrete = choose_all_reduce(test_options().costs, count * sizeof(T), n);
  const bool exact_any_order = !std::is_floating_point_v<T> || op == ReduceKind::Max || op == ReduceKind::Min;
  const std::vector<size_t> bounds = segment_bounds(count, n);
  Mismatches wrong;
  int segment = 0;
  for (size_t i = 0; i < count; ++i) {
    while (i >= bounds[size_t(segment) + 1]) ++segment;
    const T got = y[size_t(first)][i];
    bool ok;
    if (exact_any_order || concrete == AllReduceAlgorithm::Ring) {
      const T want = ring_reference(x, segment, i, op);
      ok = same_bits(got, want);
    } else if (concrete == AllReduceAlgorithm::Tree) {
      const T want = tree_reference(x, 0, i, op);
      ok = same_bits(got, want);
    } else {
      const double want = loose_reference(x, i, op);
      ok = std::abs(double(got) - want) <= (sizeof(T) == 4 ? 1e-3 : 1e-10);
    }
    wrong.note(ok, i);
  }
  EXPECT_EQ(wrong.count, 0u) << "first wrong element " << wrong.first;
}

void AllReduceMatrix::check_all(AllReduceAlgorithm algorithm) {
  for (size_t count : matrix_counts(world_->size()))
    for (ReduceKind op : {ReduceKind::Sum, ReduceKind::Avg, ReduceKind::Max, ReduceKind::Min}) {
      check_all_reduce<float>(*world_, algorithm, op, count);
      check_all_reduce<double>(*world_, algorithm, op, count);
      check_all_reduce<int32_t>(*world_, algorithm, op, count);
      check_all_reduce<int64_t>(*world_, algorithm, op, count);
      if (HasFatalFailure()) return;
    }
}

TEST_P(AllReduceMatrix, Ring) { check_all(AllReduceAlgorithm::Ring); }
TEST_P(AllReduceMatrix, Tree) { check_all(AllReduceAlgorithm::Tree); }
TEST_P(AllReduceMatrix, HalvingDoubling) { check_all(AllReduceAlgorithm::HalvingDoubling); }
TEST_P(AllReduceMatrix, RecursiveDoubling) { check_all(AllReduceAlgorithm::RecursiveDoubling); }
TEST_P(AllReduceMatrix, Auto) { check_all(AllReduceAlgorithm::Auto); }

// max(+0, -0) and max(-0, +0) differ in the sign bit: recursive doubling
// orders each step's operands by rank, so every rank still ends with the
// same bits.
TEST_P(AllReduceMatrix, RecursiveDoublingAgreesOnSignedZeros) {
  World& world = *world_;
  const int n = world.size();
  std::vector<std::vector<float>> y(size_t(n), std::vector<float>(5));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < 5; ++i) y[size_t(r)][i] = ((size_t(r) + i) % 2 == 0) ? 0.0f : -0.0f;
  world.run([&](int r) {
    return world.groups[size_t(r)].all_reduce_async(y[size_t(r)], ReduceKind::Max, AllReduceAlgorithm::RecursiveDoubling);
  });
  const int first = world.first_local();
  for (int r = first + 1; r < n; ++r)
    if (world.local(r)) {
      EXPECT_TRUE(bitwise_equal(y[size_t(r)], y[size_t(first)])) << "rank " << r << " differs";
    }
  for (float v : y[size_t(first)]) EXPECT_EQ(v, 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Collectives, AllReduceMatrix,
                         ::testing::Combine(::testing::ValuesIn(transport_factories()), ::testing::Range(1, 9)),
                         world_name);
INSTANTIATE_TEST_SUITE_P(SingleCopy, AllReduceMatrix,
                         ::testing::Combine(::testing::Values(shm_single_copy_factory()), ::testing::Values(2, 3, 5)),
                         world_name);

}  // namespace
}  // namespace meshtrain::comm::testing
