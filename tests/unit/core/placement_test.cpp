// Placements: where a view's elements sit in the one-process model's tensor.
#include <gtest/gtest.h>

#include "meshtrain/core/error.hpp"
#include "meshtrain/core/param_store.hpp"

namespace meshtrain {
namespace {

TEST(Placement, ReplicatedIsTheWholeTensor) {
  ParamStore store;
  const size_t w = store.declare("w", {4, 3}, true);
  EXPECT_TRUE(store.view(w).placement.replicated());
  EXPECT_EQ(store.view(w).global_shape, (Shape{4, 3}));
  EXPECT_EQ(global_index({4, 3}, {}, 7), 7u);
}

TEST(Placement, RowShard) {
  ParamStore store;
  const size_t w = store.declare("w", {4, 3}, true, Placement::sharded(0, 2, 1));
  EXPECT_EQ(store.view(w).shape, (Shape{2, 3}));
  EXPECT_EQ(store.view(w).numel, 6u);
  EXPECT_EQ(global_index({4, 3}, store.view(w).placement, 0), 6u);  // row 2
  EXPECT_EQ(global_index({4, 3}, store.view(w).placement, 5), 11u);
}

// GPT-2's c_attn (C, 3C) holds q, k and v side by side: with 2 ranks, rank r
// takes half of each of the three blocks of columns.
TEST(Placement, BlockedColumnShardTakesPartOfEveryBlock) {
  const Shape global{2, 6};  // C = 2: q = columns 0-1, k = 2-3, v = 4-5
  const Placement rank0 = Placement::sharded(1, 2, 0, 3), rank1 = Placement::sharded(1, 2, 1, 3);
  std::vector<size_t> got0, got1;
  for (size_t i = 0; i < 6; ++i) got0.push_back(global_index(global, rank0, i)), got1.push_back(global_index(global, rank1, i));
  EXPECT_EQ(got0, (std::vector<size_t>{0, 2, 4, 6, 8, 10}));  // columns 0, 2, 4 of rows 0 and 1
  EXPECT_EQ(got1, (std::vector<size_t>{1, 3, 5, 7, 9, 11}));
}

TEST(Placement, ADimensionThatDoesNotSplitIsAnErrorNamingTheTensor) {
  ParamStore store;
  try {
    store.declare("h.0.attn.c_attn.weight", {4, 9}, true, Placement::sharded(1, 2, 0, 3));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'h.0.attn.c_attn.weight' (4, 9) cannot be cut along dim 1 into 3 block(s) of 2 parts"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace meshtrain
