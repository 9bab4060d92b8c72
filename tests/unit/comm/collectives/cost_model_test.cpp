// The cost table behind AllReduceAlgorithm::Auto.
#include "meshtrain/comm/collectives/cost_model.hpp"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace meshtrain::comm
