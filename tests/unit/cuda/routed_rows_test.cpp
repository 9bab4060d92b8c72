// A mixture-of-experts layer's row moves on the GPU (kernels/cuda/routed_rows.hpp)
// against the CPU's (kernels/routed_rows.hpp) on GPT-2's width (C = 768) and
// 2 x 64 tokens routed top-2 over 8 experts in send order (by expert, then
// token), some tokens with no row: the gathers, the gated combine onto a
// residual and the unscaled one onto zeros, and the gates' backward, all
// with the CPU's bits, into poisoned outputs.
#include "meshtrain/kernels/cuda/routed_rows.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "gpu_test_util.hpp"
#include "kernel_compare.hpp"
#include "meshtrain/kernels/routed_rows.hpp"

namespace meshtrain::kernels::cuda {
namespace {

using test::expect_same_bits;
using test::poisoned;
using test::random_floats;
using test::to_device;
using test::to_host;

constexpr int64_t kTokens = 128, kWidth = 768, kExperts = 8, kTopK = 2;

// The layer's routes for random choices, every tenth token dropped.
struct Routes {
  std::vector<int32_t> send_token, start, rows;
};

Routes make_routes() {
  std::mt19937_64 rng(31);
  std::vector<std::vector<int32_t>> by_expert(kExperts);
  for (int32_t t = 0; t < kTokens; ++t)
    if (t % 10 != 3)
      for (int64_t r = 0; r < kTopK; ++r) by_expert[size_t((rng() % kExperts + size_t(r)) % kExperts)].push_back(t);
  Routes routes;
  for (const auto& tokens : by_expert) routes.send_token.insert(routes.send_token.end(), tokens.begin(), tokens.end());
  routes.start.assign(kTokens + 1, 0);
  for (int32_t t : routes.send_token) ++routes.start[size_t(t) + 1];
  for (int64_t t = 0; t < kTokens; ++t) routes.start[size_t(t) + 1] += routes.start[size_t(t)];
  std::vector<int32_t> next(routes.start.begin(), routes.start.end() - 1);
  routes.rows.resize(routes.send_token.size());
  for (size_t i = 0; i < routes.send_token.size(); ++i)
    routes.rows[size_t(next[size_t(routes.send_token[i])]++)] = int32_t(i);
  return routes;
}

TEST(CudaRoutedRows, GatherCombineAndGateBackwardAreTheCpus) {
  MESHTRAIN_REQUIRE_GPU();
  CudaAllocator alloc;
  const Routes routes = make_routes();
  const int64_t sent = int64_t(routes.send_token.size());
  const std::vector<float> x = random_floats(kTokens * kWidth, 41), y = random_floats(size_t(sent) * kWidth, 42),
                           gates = random_floats(size_t(sent), 43, 0.0f, 1.0f),
                           dout = random_floats(kTokens * kWidth, 44);
  auto d_x = to_device(alloc, x), d_y = to_device(alloc, y), d_gates = to_device(alloc, gates),
       d_dout = to_device(alloc, dout);
  auto d_send_token = to_device(alloc, routes.send_token), d_start = to_device(alloc, routes.start),
       d_rows = to_device(alloc, routes.rows);

  std::vector<float> gathered(size_t(sent) * kWidth);
  kernels::gather_rows(gathered.data(), x.data(), routes.send_token.data(), sent, kWidth);
  auto d_gathered = poisoned<float>(alloc, gathered.size());
  gather_rows(d_gathered.ptr().raw(), d_x.ptr().raw(), d_send_token.ptr().raw(), sent, kWidth, nullptr);
  expect_same_bits(to_host(d_gathered), gathered, "gathered rows");

  for (bool gated : {true, false}) {
    std::vector<float> out(kTokens * kWidth);
    kernels::combine_rows(out.data(), gated ? x.data() : nullptr, y.data(), routes.start.data(), routes.rows.data(),
                          gated ? gates.data() : nullptr, kTokens, kWidth);
    auto d_out = poisoned<float>(alloc, out.size());
    combine_rows(d_out.ptr().raw(), gated ? d_x.ptr().raw() : nullptr, d_y.ptr().raw(), d_start.ptr().raw(),
                 d_rows.ptr().raw(), gated ? d_gates.ptr().raw() : nullptr, kTokens, kWidth, nullptr);
    expect_same_bits(to_host(d_out), out, gated ? "gated combine onto the residual" : "unscaled combine onto zeros");
  }

  std::vector<float> dy(size_t(sent) * kWidth), dgates(static_cast<size_t>(sent));
  kernels::gate_backward_rows(dy.data(), dgates.data(), dout.data(), y.data(), routes.send_token.data(), gates.data(),
                              sent, kWidth);
  auto d_dy = poisoned<float>(alloc, dy.size()), d_dgates = poisoned<float>(alloc, dgates.size());
  gate_backward_rows(d_dy.ptr().raw(), d_dgates.ptr().raw(), d_dout.ptr().raw(), d_y.ptr().raw(),
                     d_send_token.ptr().raw(), d_gates.ptr().raw(), sent, kWidth, nullptr);
  expect_same_bits(to_host(d_dy), dy, "scaled output gradients");
  expect_same_bits(to_host(d_dgates), dgates, "gate gradients");
}

}  // namespace
}  // namespace meshtrain::kernels::cuda
