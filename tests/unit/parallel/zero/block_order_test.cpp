// ZeRO-3's prefetch order (parallel/zero/block_order.hpp): after one step's
// record, each block entered names the next different block the record
// entered after it, across forward, backward and micro-batches; a step that
// leaves the record gets the caller's answer for the rest of it, and is the
// record for the next.
#include "meshtrain/parallel/zero/block_order.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace meshtrain::parallel {
namespace {

constexpr size_t kUnknown = 99;

// What enter() answers for each block of `step`, in a new step (kUnknown: nothing).
std::vector<size_t> answers(BlockOrder& order, const std::vector<size_t>& step) {
  order.begin_step();
  std::vector<size_t> out;
  for (size_t unit : step) out.push_back(order.enter(unit).value_or(kUnknown));
  return out;
}

TEST(BlockOrder, FollowsTheLastStepsOrderPastRepeatsOfTheSameBlock) {
  BlockOrder order;
  EXPECT_EQ(order.first(), BlockOrder::npos);
  // GPipe over two micro-batches: forwards 1 2 3 1 2 3, backwards 3 2 1 3 2 1.
  const std::vector<size_t> gpipe{1, 2, 3, 1, 2, 3, 3, 2, 1, 3, 2, 1};
  EXPECT_EQ(answers(order, gpipe), std::vector<size_t>(gpipe.size(), kUnknown)) << "no record yet";
  order.begin_step();  // the step before becomes the record (another begin_step() keeps it)
  EXPECT_EQ(order.first(), 1u);
  const size_t end = BlockOrder::npos;
  EXPECT_EQ(answers(order, gpipe), (std::vector<size_t>{2, 3, 1, 2, 3, 2, 2, 1, 3, 2, 1, end}));
}

TEST(BlockOrder, AStepThatLeavesTheRecordGetsTheCallersAnswersAndBecomesTheRecord) {
  BlockOrder order;
  answers(order, {1, 2, 2, 1});
  EXPECT_EQ(answers(order, {1, 2, 3, 3, 2, 1}), (std::vector<size_t>{2, 1, kUnknown, kUnknown, kUnknown, kUnknown}))
      << "on record until the third block, then never again that step";
  EXPECT_EQ(answers(order, {1, 2, 3, 3, 2, 1}), (std::vector<size_t>{2, 3, 2, 2, 1, BlockOrder::npos}));
  // A step that enters no block keeps the record.
  answers(order, {});
  EXPECT_EQ(order.first(), 1u);
  EXPECT_EQ(answers(order, {1, 2, 3, 3, 2, 1}).front(), 2u);
}

}  // namespace
}  // namespace meshtrain::parallel
