#include "meshtrain/core/statistics.hpp"

#include <gtest/gtest.h>

namespace meshtrain {
namespace {

TEST(Median, OddCountIsTheMiddleValue) { EXPECT_EQ(median({5, 1, 9, 3, 7}), 5); }

TEST(Median, EvenCountIsTheMeanOfTheTwoMiddleValues) { EXPECT_EQ(median({4, 1, 3, 2}), 2.5); }

TEST(Median, OneOutlierDoesNotMoveIt) { EXPECT_EQ(median({1.0, 1.1, 1e9}), 1.1); }

TEST(Median, NoValuesIsZero) { EXPECT_EQ(median({}), 0); }

}  // namespace
}  // namespace meshtrain
