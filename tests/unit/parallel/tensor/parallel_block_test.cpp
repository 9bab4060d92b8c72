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
using tp_test::run_tensor_ranks;

constexpr int64_t B = 2, T = 5, C = 16, NH = 4;

std::vector<float> values(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.normal();
  return v;
}

// Runs the block's forward and backward; returns (output, input gradient).
std::pair<std::vector<float>, std::vector<float>> run(nn::Block& block, const std::vector<float>& x,
                                                      const std::vector<float>& dout) {
  const float* y = block.forward(x.data(), B, T);
  std::vector<float> out(y, y + B * T * C), dres = dout;
  nn::Workspace ws;
  block.backward(dres.data(), ws);
  return {out, dres};
}

TEST(ParallelBlock, EqualsTheSerialBlock) {
  const auto x = values(B * T * C, 1), dout = values(B * T * C, 2);
  ParamStore serial_store;
  nn::Block serial(serial_store, "h.0", C, NH, /*causal=*/true);
  serial_store.allocate();
  Rng rng(5);
  serial.init(rng, 0.3f, 0.2f);
  const auto [y_serial, dx_serial] = run(serial, x, dout);

  for (int ways : {1, 2, 4}) {
    SCOPED_TRACE("T = " + std::to_string(ways));
    std::vector<ParamStore> stores(static_cast<size_t>(ways));
    std::vector<std::pair<std::vector<float>, std::vector<float>>> results(static_cast<size_t>(ways));
    run_tensor_ranks(ways, [&](int r, TensorParallelGroup& tp) {
      ParamStore& store = stores[size_t(r)];
      nn::Block block(store, "h.0", C, NH, true, &tp);
      store.allocate();
      Rng init(5);
      block.init(init, 0.3f, 0.2f);
      results[size_t(r)] = run(block, x, dout);
    });
    for (int r = 0; r < ways; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      EXPECT_EQ(mismatches(results[size_t(r)].first.data(), y_serial.data(), y_serial.size()), 0u) << "output";
      EXPECT_EQ(mismatches(results[size_t(r)].second.data(), dx_serial.data(), dx_serial.size()), 0u) << "d input";
      for (const ParamView& v : stores[size_t(r)].views())
        EXPECT_EQ(grad_slice_mismatches(stores[size_t(r)], v, serial_store), 0u) << v.name << " gradient";
    }
  }
}

TEST(ParallelBlock, HeadsThatDoNotSplitAreAClearError) {
  const auto errors = tp_test::rank_errors(3, [&](int, TensorParallelGroup& tp) {
    ParamStore store;
    nn::Block block(store, "h.0", C, NH, true, &tp);
  });
  for (const auto& e : errors) EXPECT_NE(e.find("n_head 4 is not divisible by the 3 tensor-parallel ways"), std::string::npos) << e;
}

}  // namespace
}  // namespace meshtrain::parallel
