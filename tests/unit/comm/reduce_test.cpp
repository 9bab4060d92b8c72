// The element-wise reductions behind every collective (comm/reduce.hpp).
#include "meshtrain/comm/reduce.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {
namespace {

TEST(ReduceInto, CombinesElementWiseForEveryType) {
  std::vector<int64_t> a{1, -5, 7}, b{4, 2, -9};
  reduce_into(a.data(), b.data(), a.size() * sizeof(int64_t), {DataType::I64, ReduceOp::Max});
  EXPECT_EQ(a, (std::vector<int64_t>{4, 2, 7}));
  std::vector<double> x{0.5, 1.0}, y{0.25, -3.0};
  reduce_into(x.data(), y.data(), x.size() * sizeof(double), {DataType::F64, ReduceOp::Sum});
  EXPECT_EQ(x, (std::vector<double>{0.75, -2.0}));
}

TEST(ReduceInto, Bf16CombinesInFp32AndRoundsOnce) {
  // 256 + 1 is not a bf16 (8 significant bits): the sum rounds to even, 256.
  std::vector<Bf16> a{to_bf16(256.0f), to_bf16(1.5f), to_bf16(-2.0f)}, b{to_bf16(1.0f), to_bf16(0.25f), to_bf16(3.0f)};
  reduce_into(a.data(), b.data(), a.size() * sizeof(Bf16), {DataType::BF16, ReduceOp::Sum});
  EXPECT_EQ(to_float(a[0]), 256.0f);
  EXPECT_EQ(to_float(a[1]), 1.75f);
  EXPECT_EQ(to_float(a[2]), 1.0f);
  reduce_into(a.data(), b.data(), a.size() * sizeof(Bf16), {DataType::BF16, ReduceOp::Max});
  EXPECT_EQ(to_float(a[1]), 1.75f);
  EXPECT_EQ(to_float(a[2]), 3.0f);
  EXPECT_EQ(dtype_bytes(DataType::BF16), 2u);
  EXPECT_THROW(reduce_into(a.data(), b.data(), 3, {DataType::BF16, ReduceOp::Sum}), Error);
}

// reduce_into keeps dst as the left operand, reduce_into_after makes it the
// right one; the difference shows where op(a, b) and op(b, a) differ.
TEST(ReduceInto, AfterPutsTheDestinationSecond) {
  const float pos = 0.0f, neg = -0.0f;
  float left = pos, right = pos;
  reduce_into(&left, &neg, sizeof(float), {DataType::F32, ReduceOp::Max});  // max(+0, -0)
  reduce_into_after(&right, &neg, sizeof(float), {DataType::F32, ReduceOp::Max});  // max(-0, +0)
  EXPECT_NE(std::signbit(left), std::signbit(right));
  // and computed as op(src, dst), it equals reduce_into with the roles swapped
  float swapped = neg;
  reduce_into(&swapped, &pos, sizeof(float), {DataType::F32, ReduceOp::Max});
  EXPECT_EQ(std::signbit(swapped), std::signbit(right));
  std::vector<int32_t> d{3, 9}, s{5, 1};
  reduce_into_after(d.data(), s.data(), d.size() * sizeof(int32_t), {DataType::I32, ReduceOp::Min});
  EXPECT_EQ(d, (std::vector<int32_t>{3, 1}));
}

TEST(ReduceInto, APartialElementIsAnError) {
  float a = 1, b = 2;
  EXPECT_ANY_THROW(reduce_into(&a, &b, 3, {DataType::F32, ReduceOp::Sum}));
  EXPECT_ANY_THROW(reduce_into_after(&a, &b, 3, {DataType::F32, ReduceOp::Sum}));
}

}  // namespace
}  // namespace meshtrain::comm
