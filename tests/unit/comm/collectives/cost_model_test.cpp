// The cost table behind AllReduceAlgorithm::Auto.
#include "meshtrain/comm/collectives/cost_model.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {
namespace {

TEST(CostModelTest, RingForLargeMessagesLatencyAlgorithmsForSmallOnes) {
  const CostTable table;
  EXPECT_EQ(choose_all_reduce(table, size_t{256} << 20, 8), AllReduceAlgorithm::Ring);
  EXPECT_EQ(choose_all_reduce(table, 4096, 8), AllReduceAlgorithm::RecursiveDoubling);  // 3 steps, not 6
  EXPECT_EQ(choose_all_reduce(table, 4096, 2), AllReduceAlgorithm::RecursiveDoubling);  // one round trip, not 2
  EXPECT_EQ(choose_all_reduce(table, size_t{256} << 10, 8), AllReduceAlgorithm::HalvingDoubling);
  EXPECT_EQ(choose_all_reduce(table, size_t{256} << 10, 2), AllReduceAlgorithm::Ring);
  EXPECT_EQ(choose_all_reduce(table, 4096, 3), AllReduceAlgorithm::Tree);  // the fold costs 2 extra steps
  EXPECT_EQ(all_reduce_seconds(table, AllReduceAlgorithm::Tree, 1 << 20, 1), 0.0);
}

TEST(CostModelTest, TheTableIsData) {
  CostTable table;
  for (AlgorithmCost& row : table.all_reduce)
    if (row.algorithm != AllReduceAlgorithm::Tree) row.alpha_s = 1.0;  // make everything but tree slow
  EXPECT_EQ(choose_all_reduce(table, 4096, 8), AllReduceAlgorithm::Tree);
  EXPECT_DOUBLE_EQ(all_reduce_seconds(table, AllReduceAlgorithm::Ring, 0, 4), 6.0);  // 2(n-1) steps
}

// A measured link keeps each algorithm's cost relative to the ring's, so a
// large 2-rank buffer still goes by ring (recursive doubling copies more)
// and a small one by recursive doubling, as on the default table.
TEST(CostModelTest, OneLinkKeepsTheAlgorithmsCrossovers) {
  const CostTable link = CostTable::on_one_link(20e-6, 2e-10);
  EXPECT_EQ(choose_all_reduce(link, size_t{64} << 20, 2), AllReduceAlgorithm::Ring);
  EXPECT_EQ(choose_all_reduce(link, 4096, 2), AllReduceAlgorithm::RecursiveDoubling);
  EXPECT_DOUBLE_EQ(link.row(AllReduceAlgorithm::Ring).beta_s_per_byte, 2e-10);
  EXPECT_DOUBLE_EQ(link.row(AllReduceAlgorithm::RecursiveDoubling).alpha_s, 20e-6);
}

// The stream played out piece by piece: piece i starts when it is ready
// (i / k of the window) and the stream is free; what ends past the window
// is exposed.
double stream_past_window(double piece_s, int pieces, double window_s) {
  double free_at = 0;
  for (int i = 1; i <= pieces; ++i) free_at = std::max(free_at, i * window_s / pieces) + piece_s;
  return free_at - window_s;
}

// The general form (pieces of their own lengths and ready times) given the
// uniform case.
double exposed_by_general_form(double piece_s, int pieces, double window_s) {
  std::vector<double> lengths(size_t(pieces), piece_s), ready;
  for (int i = 1; i <= pieces; ++i) ready.push_back(i * window_s / pieces);
  return exposed_seconds(lengths, ready, window_s);
}

TEST(CostModelTest, ExposedTimeIsWhatTheStreamRunsPastTheWindow) {
  for (const int pieces : {1, 2, 7, 12})
    for (const double piece_s : {0.1e-3, 1e-3, 3e-3, 10e-3})
      for (const double window_s : {0.0, 5e-3, 20e-3, 80e-3})
        for (const double expected : {stream_past_window(piece_s, pieces, window_s), exposed_by_general_form(piece_s, pieces, window_s)})
          EXPECT_NEAR(exposed_seconds(piece_s, pieces, window_s), expected, 1e-12)
              << pieces << " pieces of " << piece_s << " s behind " << window_s << " s";
  // Fast links hide all but the last piece; with no window nothing hides.
  EXPECT_DOUBLE_EQ(exposed_seconds(1e-3, 10, 100e-3), 1e-3);
  EXPECT_DOUBLE_EQ(exposed_seconds(1e-3, 10, 0), 10e-3);
  EXPECT_EQ(exposed_seconds(1e-3, 0, 1), 0.0);
  // Uneven pieces: a large bucket early, a small one at the end. The large
  // one ends at 0.2 + 0.5 = 0.7 s, before the window's end; only the last
  // (0.01 s, ready at 1 s) shows. Made late, the large one shows instead.
  const std::vector<double> lengths{0.5, 0.01}, early{0.2, 1.0}, late{0.9, 1.0};
  EXPECT_NEAR(exposed_seconds(lengths, early, 1.0), 0.01, 1e-12);
  EXPECT_NEAR(exposed_seconds(lengths, late, 1.0), 0.9 + 0.5 + 0.01 - 1.0, 1e-12);
  EXPECT_THROW(exposed_seconds(lengths, std::vector<double>{1.0}, 1.0), CommError);
}

}  // namespace
}  // namespace meshtrain::comm
