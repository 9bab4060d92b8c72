// A transformer block (attention on n_head/T heads per rank, the MLP on 4C/T
// hidden units) against the serial block with the same weights: T ranks as
// threads, T = 1, 2, 4; output, input gradient and every parameter
// gradient (each rank's slice) agree.
#include <gtest/gtest.h>

#include "meshtrain/core/error.hpp"
#include "meshtrain/nn/block.hpp"
#include "meshtrain/nn/workspace.hpp"
#include "tp_test_util.hpp"

namespace meshtrain::parallel {
namespace {

using tp_test::grad_slice_mismatches;
using tp_test::mismatches;
using tp_test::rank_part;
using tp_test::run_tensor_ranks;

constexpr int64_t B = 2, T = 5, C = 16, NH = 4;

std::vector<float> values(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.normal();
  return v;
}

// Runs the block's forward and backward over sequences of seq_len; returns
// (output, input gradient), of x's rows (all, or a rank's under sequence parallelism).
std::pair<std::vector<float>, std::vector<float>> run(nn::Block& block, const std::vector<float>& x,
                                                      const std::vector<float>& dout, int64_t seq_len) {
  const float* y = block.forward(x.data(), B, seq_len);
  std::vector<float> out(y, y + x.size()), dres = dout;
  nn::Workspace ws{kernels::cpu_backend().allocator()};
  block.backward(dres.data(), ws);
  return {out, dres};
}

// The block over B sequences of seq_len against the serial block at T = 1,
// 2, 4: output, input gradient and every gradient slice. Under sequence
// parallelism (layernorms and residual on each rank's rows, attention on
// whole sequences) rank r's output and input gradient are the serial ones'
// rows [r N/T, (r+1) N/T), and ln_1/ln_2's gradients (summed over the group)
// agree too.
void expect_equals_serial(int64_t seq_len, bool sequence_parallel) {
  const auto x = values(B * seq_len * C, 1), dout = values(B * seq_len * C, 2);
  ParamStore serial_store;
  nn::Block serial(serial_store, "h.0", C, NH, /*causal=*/true);
  serial_store.allocate();
  Rng rng(5);
  serial.init(rng, 0.3f, 0.2f);
  const auto [y_serial, dx_serial] = run(serial, x, dout, seq_len);

  for (int ways : {1, 2, 4}) {
    SCOPED_TRACE("T = " + std::to_string(ways));
    std::vector<ParamStore> stores(static_cast<size_t>(ways));
    std::vector<std::pair<std::vector<float>, std::vector<float>>> results(static_cast<size_t>(ways));
    run_tensor_ranks(
        ways,
        [&](int r, TensorParallelGroup& tp) {
          ParamStore& store = stores[size_t(r)];
          nn::Block block(store, "h.0", C, NH, true, &tp);
          store.allocate();
          Rng init(5);
          block.init(init, 0.3f, 0.2f);
          results[size_t(r)] = run(block, rank_part(x, r, ways, sequence_parallel),
                                   rank_part(dout, r, ways, sequence_parallel), seq_len);
        },
        sequence_parallel);
    for (int r = 0; r < ways; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      const auto y = rank_part(y_serial, r, ways, sequence_parallel);
      const auto dx = rank_part(dx_serial, r, ways, sequence_parallel);
      ASSERT_EQ(results[size_t(r)].first.size(), y.size());
      EXPECT_EQ(mismatches(results[size_t(r)].first.data(), y.data(), y.size()), 0u) << "output";
      EXPECT_EQ(mismatches(results[size_t(r)].second.data(), dx.data(), dx.size()), 0u) << "d input";
      for (const ParamView& v : stores[size_t(r)].views())
        EXPECT_EQ(grad_slice_mismatches(stores[size_t(r)], v, serial_store), 0u) << v.name << " gradient";
    }
  }
}

TEST(ParallelBlock, EqualsTheSerialBlock) { expect_equals_serial(T, false); }

// B x 6 = 12 rows: at T = 4, 3 rows a rank, so a rank's rows cross from one
// sequence into the next.
TEST(ParallelBlock, SequenceParallelEqualsTheSerialBlockRowByRow) { expect_equals_serial(6, true); }

TEST(ParallelBlock, HeadsThatDoNotSplitAreAClearError) {
  const auto errors = tp_test::rank_errors(3, [&](int, TensorParallelGroup& tp) {
    ParamStore store;
    nn::Block block(store, "h.0", C, NH, true, &tp);
  });
  for (const auto& e : errors) EXPECT_NE(e.find("n_head 4 is not divisible by the 3 tensor-parallel ways"), std::string::npos) << e;
}

}  // namespace
}  // namespace meshtrain::parallel
