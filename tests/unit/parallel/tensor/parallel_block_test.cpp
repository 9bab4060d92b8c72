// A transformer block (attention on n_head/T heads per rank, the MLP on 4C/T
// hidden units) against the serial block with the same weights: T ranks as
// threads, T = 1, 2, 4; output, input gradient and every parameter
// gradient (each rank's slice) agree.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/comm/transport/inproc/inproc_transport.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/nn/block.hpp"
#include "meshtrain/nn/workspace.hpp"
#include "meshtrain/parallel/tensor/tensor_parallel_group.hpp"

namespace meshtrain::parallel {
namespace {

constexpr int64_t B = 2, T = 5, C = 16, NH = 4;

std::vector<float> values(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.normal();
  return v;
}

size_t mismatches(const float* got, const float* want, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += std::abs(got[i] - want[i]) > 1e-5f * (1.0f + std::abs(want[i]));
  return bad;
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
    auto transports = comm::make_inproc_transports(ways);
    std::vector<ParamStore> stores(static_cast<size_t>(ways));
    std::vector<std::pair<std::vector<float>, std::vector<float>>> results(static_cast<size_t>(ways));
    std::vector<std::thread> ranks;
    for (int r = 0; r < ways; ++r) {
      ranks.emplace_back([&, r] {
        auto communicator = std::make_shared<comm::Communicator>(std::move(transports[size_t(r)]));
        comm::ProcessGroup group(communicator);
        TensorParallelGroup tp(group);
        ParamStore& store = stores[size_t(r)];
        nn::Block block(store, "h.0", C, NH, true, &tp);
        store.allocate();
        Rng init(5);
        block.init(init, 0.3f, 0.2f);
        results[size_t(r)] = run(block, x, dout);
      });
    }
    for (auto& t : ranks) t.join();
    for (int r = 0; r < ways; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      EXPECT_EQ(mismatches(results[size_t(r)].first.data(), y_serial.data(), y_serial.size()), 0u) << "output";
      EXPECT_EQ(mismatches(results[size_t(r)].second.data(), dx_serial.data(), dx_serial.size()), 0u) << "d input";
      const ParamStore& store = stores[size_t(r)];
      for (const ParamView& v : store.views()) {
        const ParamView& w = *serial_store.find(v.name);
        std::vector<float> want(v.numel);
        for (size_t i = 0; i < v.numel; ++i)
          want[i] = serial_store.grads()[w.offset + global_index(v.global_shape, v.placement, i)];
        EXPECT_EQ(mismatches(store.grads().data() + v.offset, want.data(), v.numel), 0u) << v.name << " gradient";
      }
    }
  }
}

TEST(ParallelBlock, HeadsThatDoNotSplitAreAClearError) {
  auto transports = comm::make_inproc_transports(3);
  std::vector<std::string> errors(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      auto communicator = std::make_shared<comm::Communicator>(std::move(transports[size_t(r)]));
      comm::ProcessGroup group(communicator);
      TensorParallelGroup tp(group);
      ParamStore store;
      try {
        nn::Block block(store, "h.0", C, NH, true, &tp);
      } catch (const Error& e) {
        errors[size_t(r)] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (const auto& e : errors) EXPECT_NE(e.find("n_head 4 is not divisible by the 3 tensor-parallel ways"), std::string::npos) << e;
}

}  // namespace
}  // namespace meshtrain::parallel
