// The data-parallel term of plan --config's forecast (data_parallel_comm.hpp):
// each ZeRO stage's collectives as the runtime runs them, and the part that
// hides behind compute on devices, against the table written out here.
#include "meshtrain/train/forecast/data_parallel_comm.hpp"

#include <gtest/gtest.h>

#include "meshtrain/parallel/data_parallel/gradient_buckets.hpp"

namespace meshtrain {
namespace {

constexpr size_t kDpBlock = 4096, kDpWte = 8192;  // floats; multiples of the store's alignment
constexpr int kDpBlocks = 4;

// An embedding outside any named unit (a whole-step unit) and 4 blocks.
void declare_four_blocks(ParamStore& store) {
  store.declare("wte", Shape{int64_t(kDpWte)}, false);
  for (int b = 0; b < kDpBlocks; ++b) {
    store.begin_unit("h." + std::to_string(b));
    store.declare("h." + std::to_string(b) + ".w", Shape{int64_t(kDpBlock)}, true);
    store.end_unit();
  }
  store.allocate();
}

struct DpForecast {
  double seconds, hidden, bytes;
};

DpForecast dp_forecast(const ParamStore& store, const comm::CostTable& link, int stage, int micro_batches,
                  double forward_s, double backward_s, size_t bucket_bytes = size_t(1) << 30, bool bf16 = false) {
  JobForecast f;
  f.zero_stage = stage;
  add_data_parallel_comm({.algorithm = comm::AllReduceAlgorithm::Ring,
                          .ways = 2,
                          .micro_batches = micro_batches,
                          .bucket_bytes = bucket_bytes,
                          .bf16_wire = bf16,
                          .forward_s = forward_s,
                          .backward_s = backward_s},
                         store, link, link, f);
  return {f.comm_s, f.comm_hidden_s, f.comm_bytes};
}

TEST(DataParallelComm, EachStageCountsTheRuntimesCollectives) {
  ParamStore store;
  declare_four_blocks(store);
  ASSERT_EQ(store.units().size(), size_t(1 + kDpBlocks));
  const double alpha = 10e-6, beta = 1e-9;
  const comm::CostTable link = comm::CostTable::on_one_link(alpha, beta);
  // Over 2 ranks a unit's gather moves half its bytes after one latency.
  const double block_s = alpha + 0.5 * kDpBlock * 4 * beta, wte_s = alpha + 0.5 * kDpWte * 4 * beta;
  const double blocks_s = kDpBlocks * block_s, total = (kDpBlocks * kDpBlock + kDpWte) * 4.0;
  const double sums = 2 * comm::all_reduce_seconds(link, comm::AllReduceAlgorithm::Ring, sizeof(double), 2);
  const double all_reduce = comm::all_reduce_seconds(link, comm::AllReduceAlgorithm::Ring, size_t(total), 2);
  for (const int M : {1, 3}) {
    SCOPED_TRACE(M);
    DpForecast f = dp_forecast(store, link, 0, M, 0, 0);
    EXPECT_NEAR(f.seconds, all_reduce + sums, 1e-12);  // once, in the last micro-batch
    EXPECT_DOUBLE_EQ(f.bytes, total);
    f = dp_forecast(store, link, 1, M, 0, 0);
    EXPECT_NEAR(f.seconds, all_reduce + blocks_s + wte_s + sums, 1e-12);
    EXPECT_DOUBLE_EQ(f.bytes, 1.5 * total);
    f = dp_forecast(store, link, 2, M, 0, 0);  // every micro-batch reduce-scatters, one gather after the update
    EXPECT_NEAR(f.seconds, (M + 1) * (blocks_s + wte_s) + sums, 1e-12);
    EXPECT_DOUBLE_EQ(f.bytes, (M + 1) * 0.5 * total);
    f = dp_forecast(store, link, 3, M, 0, 0);  // blocks gathered twice and reduced per micro-batch, wte once a step
    EXPECT_NEAR(f.seconds, M * (3 * blocks_s + wte_s) + wte_s + sums, 1e-12);
    EXPECT_DOUBLE_EQ(f.bytes, M * (3 * 0.5 * kDpBlocks * kDpBlock * 4 + 0.5 * kDpWte * 4) + 0.5 * kDpWte * 4);
    EXPECT_EQ(f.hidden, 0.0);  // no window: the CPU
  }
  // bf16 on the wire: half the gradients' and ZeRO-3's bytes; the updated parameters' gather stays fp32.
  EXPECT_DOUBLE_EQ(dp_forecast(store, link, 0, 1, 0, 0, size_t(1) << 30, true).bytes, 0.5 * total);
  EXPECT_DOUBLE_EQ(dp_forecast(store, link, 1, 1, 0, 0, size_t(1) << 30, true).bytes, 1.0 * total);
  EXPECT_DOUBLE_EQ(dp_forecast(store, link, 2, 2, 0, 0, size_t(1) << 30, true).bytes, (2 * 0.25 + 0.5) * total);
  EXPECT_DOUBLE_EQ(dp_forecast(store, link, 3, 1, 0, 0, size_t(1) << 30, true).bytes,
                   0.5 * dp_forecast(store, link, 3, 1, 0, 0).bytes);
}

TEST(DataParallelComm, OnDevicesThePiecesHideBehindTheWindows) {
  ParamStore store;
  declare_four_blocks(store);
  const comm::CostTable link = comm::CostTable::on_one_link(10e-6, 1e-9);
  const double block_s = 10e-6 + 0.5 * kDpBlock * 4 * 1e-9, wte_s = 10e-6 + 0.5 * kDpWte * 4 * 1e-9;
  // A long backward hides all but the last bucket, planned as GradientSync plans them.
  const size_t bucket_bytes = (kDpBlocks * kDpBlock + kDpWte) * 4 / 4;
  const auto plan = parallel::plan_gradient_buckets(store, bucket_bytes, bucket_bytes);
  ASSERT_GE(plan.size(), size_t(3));
  double all = 0, last = 0;
  for (const auto& b : plan)
    all += last = comm::all_reduce_seconds(link, comm::AllReduceAlgorithm::Ring, b.elements() * 4, 2);
  DpForecast f = dp_forecast(store, link, 0, 1, 1.0, 1.0, bucket_bytes);
  EXPECT_NEAR(f.seconds - f.hidden, last + 2 * comm::all_reduce_seconds(link, comm::AllReduceAlgorithm::Ring,
                                                                         sizeof(double), 2), 1e-12);
  EXPECT_NEAR(f.hidden, all - last, 1e-12);
  // With no backward to hide behind, the buckets run one after another past it.
  EXPECT_EQ(dp_forecast(store, link, 0, 1, 0, 0, bucket_bytes).hidden, 0.0);
  // ZeRO-3, long windows: the first block's gather and the last one's backward pair show, and
  // the whole-step unit's reduce-scatter and once-a-step gather; per micro-batch.
  for (const int M : {1, 2}) {
    f = dp_forecast(store, link, 3, M, 1.0, 1.0);
    const double exposed = M * (block_s + 2 * block_s + wte_s) + wte_s;
    EXPECT_NEAR(f.seconds - f.hidden, exposed + 2 * comm::all_reduce_seconds(link, comm::AllReduceAlgorithm::Ring,
                                                                              sizeof(double), 2),
                1e-12);
  }
  // Shorter windows hide less, never more than there is.
  double last_hidden = f.hidden;
  for (const double window : {1e-3, 1e-4, 1e-5}) {
    f = dp_forecast(store, link, 3, 2, window, window);
    EXPECT_LE(f.hidden, last_hidden);
    EXPECT_GE(f.hidden, 0.0);
    last_hidden = f.hidden;
  }
  EXPECT_LT(last_hidden, dp_forecast(store, link, 3, 2, 1.0, 1.0).hidden);
}

}  // namespace
}  // namespace meshtrain
