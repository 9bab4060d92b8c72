// Collectives on bf16 buffers (parallel.reduce_dtype = "bf16"): every
// all-reduce algorithm, reduce-scatter and all-gather over every transport
// and world sizes 1-5. Every rank ends with the same bits; a sum is within
// bf16's rounding of the exact sum: each of the n - 1 combining steps rounds
// once (2^-9 relative to the partial sum), so |got - exact| <= n 2^-9 sum |x|.
#include <cmath>

#include "harness.hpp"
#include "meshtrain/core/bf16.hpp"

namespace meshtrain::comm::testing {
namespace {

class Bf16Collectives : public ::testing::TestWithParam<std::tuple<TransportFactory, int>> {
 protected:
  void SetUp() override {
    world_ = std::make_unique<World>(std::get<0>(GetParam()), std::get<1>(GetParam()));
    if (world_->size() == 0) GTEST_SKIP() << "mpirun started a world of another size";
  }
  std::unique_ptr<World> world_;
};

std::vector<std::vector<Bf16>> inputs(int n, size_t count) {
  std::vector<std::vector<Bf16>> x(static_cast<size_t>(n), std::vector<Bf16>(count));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) x[size_t(r)][i] = to_bf16(std::sin(0.37f * float(i) + 1.3f * float(r)) * 3.0f);
  return x;
}

bool same_bits(const std::vector<Bf16>& a, const std::vector<Bf16>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(Bf16)) == 0;
}

void expect_sum(const std::vector<std::vector<Bf16>>& x, size_t i, Bf16 got, double scale, const std::string& what) {
  const int n = int(x.size());
  double exact = 0, magnitude = 0;
  for (const auto& xr : x) {
    exact += to_float(xr[i]);
    magnitude += std::abs(to_float(xr[i]));
  }
  ASSERT_NEAR(to_float(got), exact * scale, (n * std::ldexp(magnitude, -9) + std::ldexp(std::abs(exact), -8)) * scale)
      << what << " element " << i;
}

TEST_P(Bf16Collectives, AllReduceSumsWithinBf16Rounding) {
  World& world = *world_;
  const int n = world.size();
  const size_t count = 1000 + size_t(n);  // not a multiple of n
  for (AllReduceAlgorithm algorithm : {AllReduceAlgorithm::Ring, AllReduceAlgorithm::Tree,
                                       AllReduceAlgorithm::HalvingDoubling, AllReduceAlgorithm::RecursiveDoubling}) {
    for (ReduceKind op : {ReduceKind::Sum, ReduceKind::Avg}) {
      const auto x = inputs(n, count);
      auto y = x;
      world.run([&](int r) { return world.groups[size_t(r)].all_reduce_async(y[size_t(r)], op, algorithm); });
      const int first = world.first_local();
      const std::string what = std::string(algorithm_name(algorithm)) + " " + std::string(reduce_kind_name(op));
      for (int r = first + 1; r < n; ++r)
        if (world.local(r)) {
          ASSERT_TRUE(same_bits(y[size_t(r)], y[size_t(first)])) << what << ": rank " << r;
        }
      for (size_t i = 0; i < count; ++i)
        expect_sum(x, i, y[size_t(first)][i], op == ReduceKind::Avg ? 1.0 / n : 1.0, what);
    }
  }
}

TEST_P(Bf16Collectives, ReduceScatterAndAllGather) {
  World& world = *world_;
  const int n = world.size();
  const size_t per_rank = 37;
  const auto x = inputs(n, per_rank * size_t(n));
  std::vector<std::vector<Bf16>> mine(static_cast<size_t>(n), std::vector<Bf16>(per_rank));
  world.run([&](int r) {
    return world.groups[size_t(r)].reduce_scatter_async(x[size_t(r)], mine[size_t(r)], ReduceKind::Sum);
  });
  for (int r = 0; r < n; ++r)
    if (world.local(r))
      for (size_t i = 0; i < per_rank; ++i) expect_sum(x, size_t(r) * per_rank + i, mine[size_t(r)][i], 1.0, "reduce_scatter");
  std::vector<std::vector<Bf16>> all(static_cast<size_t>(n), std::vector<Bf16>(per_rank * n));
  world.run([&](int r) { return world.groups[size_t(r)].all_gather_async(mine[size_t(r)], all[size_t(r)]); });
  for (int r = 0; r < n; ++r) {
    if (!world.local(r)) continue;
    for (int s = 0; s < n; ++s)
      if (world.local(s)) {
        ASSERT_EQ(std::memcmp(all[size_t(r)].data() + size_t(s) * per_rank, mine[size_t(s)].data(), per_rank * sizeof(Bf16)), 0)
            << "rank " << r << " segment " << s;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Collectives, Bf16Collectives,
                         ::testing::Combine(::testing::ValuesIn(transport_factories()), ::testing::Range(1, 6)),
                         world_name);

}  // namespace
}  // namespace meshtrain::comm::testing
