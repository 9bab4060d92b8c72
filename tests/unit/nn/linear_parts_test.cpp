// The parts a Linear orders (linear.hpp), each on its own: the serial
// shard passes every buffer through without a group, and each precision's
// operands keep what a deferred weight gradient needs after the caller's
// buffers have changed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "grad_check.hpp"
#include "meshtrain/nn/linear_operands.hpp"
#include "meshtrain/nn/linear_shard.hpp"

namespace meshtrain::nn {
namespace {

constexpr int64_t kIn = 5, kOut = 7, kRows = 3;

TEST(LinearShard, TheSerialShardPassesEveryBufferThrough) {
  const LinearShard serial;
  DeviceArray<float> work(host_memory(), MemoryKind::Activations);
  std::vector<float> a(kRows * kOut, 1.0f), b(kRows * kIn, 2.0f);
  EXPECT_FALSE(serial.sequence_parallel() || serial.gathers_input() || serial.gathers_output_grad());
  EXPECT_FALSE(serial.sums_output() || serial.sums_input_grad());
  EXPECT_EQ(serial.output_rows(kRows), kRows);
  EXPECT_EQ(serial.gather_input(b.data(), kRows, kIn, work), b.data());
  EXPECT_EQ(serial.product_output(a.data(), kRows, kOut, work), a.data());
  EXPECT_EQ(serial.gather_output_grad(a.data(), kRows, kOut, work), a.data());
  EXPECT_EQ(serial.product_input_grad(b.data(), work), b.data());
  serial.finish_output(a.data(), a.data(), kRows, kOut);  // nothing to sum
  serial.finish_input_grad(b.data(), b.data(), kRows, kIn);
  EXPECT_EQ(work.size(), 0u);
  EXPECT_EQ(a, std::vector<float>(kRows * kOut, 1.0f));
  EXPECT_EQ(LinearShard::column(nullptr).kind, LinearShard::Kind::None);
  EXPECT_EQ(LinearShard::row(nullptr).kind, LinearShard::Kind::None);
}

// The weight gradient of operands that kept (x, dy), with the caller's dy
// overwritten after keep_output_grad(..., deferred): a deferred weight
// gradient reads the operands' own copy.
template <class Operands>
std::vector<float> weight_grad_after_dy_changes(Precision precision, bool deferred) {
  ParamStore store;
  const size_t w = store.declare("w", {kIn, kOut}, true);
  store.set_compute_precision(precision);
  store.allocate();
  Rng rng(4);
  randomize(store, rng, 0.5f);
  std::vector<float> x(kRows * kIn), dy(kRows * kOut), dbias(kOut, 0.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * float(i % 11) - 0.4f;
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = 0.05f * float(i % 13) - 0.3f;
  Operands operands(store, w, kIn, kOut);
  operands.keep_input(x.data(), kRows);
  operands.keep_weight();
  operands.keep_output_grad(dy.data(), kRows, dbias.data(), deferred);
  std::fill(dy.begin(), dy.end(), 9.0f);  // the caller's buffer, reused
  std::vector<float> dW(kIn * kOut, 0.0f);
  operands.weight_grad(0.0f, dW.data());
  return dW;
}

TEST(LinearOperands, ADeferredWeightGradientReadsTheOperandsCopyOfDy) {
  // fp32 borrows dy unless deferred; bf16 always reads its rounded copy.
  const auto fp32_kept = weight_grad_after_dy_changes<Fp32Operands>(Precision::Fp32, true);
  const auto fp32_borrowed = weight_grad_after_dy_changes<Fp32Operands>(Precision::Fp32, false);
  EXPECT_NE(fp32_kept, fp32_borrowed);  // the borrowed dy was overwritten by 9s
  const auto bf16_kept = weight_grad_after_dy_changes<Bf16Operands>(Precision::Bf16, true);
  const auto bf16_undeferred = weight_grad_after_dy_changes<Bf16Operands>(Precision::Bf16, false);
  EXPECT_EQ(0, std::memcmp(bf16_kept.data(), bf16_undeferred.data(), bf16_kept.size() * sizeof(float)));
  for (size_t i = 0; i < fp32_kept.size(); ++i)  // bf16's operands are fp32's, rounded
    EXPECT_NEAR(bf16_kept[i], fp32_kept[i], 1e-2 * (1.0 + std::abs(fp32_kept[i]))) << i;
}

}  // namespace
}  // namespace meshtrain::nn
