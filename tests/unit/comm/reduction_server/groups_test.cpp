// Reducers shared out among the data-parallel groups of a tensor-parallel
// job (reduction_server/groups.hpp).
#include "meshtrain/comm/reduction_server/groups.hpp"

#include <gtest/gtest.h>

#include "meshtrain/core/error.hpp"

namespace meshtrain::comm::reduction_server {
namespace {

TEST(ReducerGroups, OneGroupIsEveryWorkerAndReducer) {
  const GroupRanks all = group_ranks(4, 2, 1, 0);
  EXPECT_EQ(all.workers, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(all.reducers, (std::vector<int>{4, 5}));
  EXPECT_EQ(reducer_group(4, 2, 1, 5), 0);
}

TEST(ReducerGroups, TensorRanksGetTheirDataGroupAndAShareOfTheReducers) {
  // 6 workers = 3 data ways x 2 tensor ways (tensor fastest), 4 reducers.
  const GroupRanks even = group_ranks(6, 4, 2, 0), odd = group_ranks(6, 4, 2, 1);
  EXPECT_EQ(even.workers, (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(odd.workers, (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(even.reducers, (std::vector<int>{6, 7}));
  EXPECT_EQ(odd.reducers, (std::vector<int>{8, 9}));
  for (int r : even.reducers) EXPECT_EQ(reducer_group(6, 4, 2, r), 0);
  for (int r : odd.reducers) EXPECT_EQ(reducer_group(6, 4, 2, r), 1);
}

TEST(ReducerGroups, ReducersThatDoNotSplitAreAConfigError) {
  try {
    group_ranks(4, 3, 2, 0);
    FAIL() << "3 reducers split among 2 groups";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("3 reducers do not split into 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace meshtrain::comm::reduction_server
