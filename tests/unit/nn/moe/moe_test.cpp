// The mixture-of-experts layer on one rank: routing (top-k, renormalised
// gates, capacity and drops), gradients against finite differences, and the
// load-balancing loss's after-the-step gradient against finite differences
// of the loss itself.
#include <gtest/gtest.h>

#include "../grad_check.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/bf16.hpp"
#include "meshtrain/nn/moe/moe_mlp.hpp"
#include "meshtrain/nn/moe/router.hpp"
#include "meshtrain/nn/moe/router_sums.hpp"

namespace meshtrain::nn {
namespace {

using namespace testing;

MoeConfig moe(int64_t E, int64_t k, double capacity_factor = 0, double z_loss = 0) {
  MoeConfig c;
  c.n_expert = E;
  c.top_k = k;
  c.capacity_factor = capacity_factor;
  c.z_loss_coef = z_loss;
  return c;
}

class MoeGradients : public ::testing::TestWithParam<int64_t> {};  // top_k

// out = residual + sum of gated expert outputs, plus z-loss: every
// parameter's and the input's gradient by finite differences. The routing
// is discontinuous; the seed keeps every token's choices away from a tie
// at the step sizes used.
TEST_P(MoeGradients, BackwardMatchesFiniteDifferences) {
  const int64_t B = 2, T = 3, C = 6, N = B * T, k = GetParam();
  const MoeConfig config = moe(4, k, 0, /*z_loss=*/0.1);
  ParamStore store;
  RouterSums sums(config.n_expert, C, false);
  MoeMlp layer(store, "h.0.mlp", C, config, nullptr, nullptr, &sums);
  store.allocate();
  Rng rng(11);
  randomize(store, rng, 0.4f);
  auto x = random_vector(N * C, rng), res = random_vector(N * C, rng), w = random_vector(N * C, rng);
  Workspace ws{kernels::cpu_backend().allocator()};
  auto loss = [&] {
    sums.reset();
    const float* y = layer.forward(x.data(), B, T, res.data());
    return dot(y, w) + config.z_loss_coef * sums.z_squares() / double(N);
  };
  loss();
  std::vector<float> dx(N * C);
  layer.backward(dx.data(), w.data(), ws);
  const Tolerance tol{.eps = 2e-3f, .atol = 2e-3, .rtol = 3e-2};
  expect_grad_matches(x.data(), dx.data(), x.size(), loss, "dinp", rng, 36, tol);
  expect_param_grads_match(store, loss, rng, 10, tol);
  EXPECT_TRUE(store.find("h.0.mlp.experts.3.c_proj.weight")->expert);
  EXPECT_FALSE(store.find("h.0.mlp.router.weight")->expert);
  EXPECT_EQ(store.find("h.0.mlp.router.weight")->shape, (Shape{C, 4}));
}

INSTANTIATE_TEST_SUITE_P(TopK, MoeGradients, ::testing::Values(1, 2));

// Top-2 gates are the chosen probabilities renormalised; top-1 is p itself.
TEST(Router, GatesAreRenormalisedTopKProbabilities) {
  const int64_t C = 5, N = 7;
  for (int64_t k : {1, 2, 3}) {
    ParamStore store;
    Router router(store, "r", C, moe(4, k));
    store.allocate();
    Rng rng(3);
    randomize(store, rng, 0.5f);
    auto x = random_vector(N * C, rng);
    router.forward(x.data(), 1, N, nullptr);
    for (int64_t t = 0; t < N; ++t) {
      std::vector<double> z(4);
      double m = -1e30, s = 0;
      for (int64_t e = 0; e < 4; ++e) {
        for (int64_t c = 0; c < C; ++c) z[size_t(e)] += double(x[size_t(t * C + c)]) * store.param(0)[c * 4 + e];
        m = std::max(m, z[size_t(e)]);
      }
      for (double& v : z) s += std::exp(v - m);
      double chosen = 0, last = 2;
      for (int64_t r = 0; r < k; ++r) {
        const double p = std::exp(z[size_t(router.choices()[t * k + r])] - m) / s;
        EXPECT_LE(p, last + 1e-7) << "choices in descending order";
        last = p;
        chosen += p;
      }
      double gate_sum = 0;
      for (int64_t r = 0; r < k; ++r) gate_sum += router.gates()[t * k + r];
      EXPECT_NEAR(gate_sum, k == 1 ? chosen : 1.0, 1e-5) << "token " << t << " k " << k;
    }
  }
}

// Under training.precision = "bf16" the router's product takes x and W
// rounded to bf16 (fp32 sums): the gates are the softmax of those logits,
// not of the fp32 ones; backward's input gradient stays within bf16's
// rounding of fp32's.
TEST(Router, Bf16ProductsRouteOnRoundedOperands) {
  const int64_t C = 16, N = 9, E = 4, k = 2;
  auto run = [&](Precision precision, std::vector<float>& gates, std::vector<float>& dx, std::vector<float>& x,
                 std::vector<float>& w) {
    ParamStore store;
    store.set_compute_precision(precision);
    Router router(store, "r", C, moe(E, k));
    store.allocate();
    Rng rng(5);
    randomize(store, rng, 0.5f);
    x = random_vector(N * C, rng);
    w.assign(store.param(0), store.param(0) + C * E);
    router.forward(x.data(), 1, N, nullptr);
    gates.assign(router.gates(), router.gates() + N * k);
    std::vector<float> dgates = random_vector(N * k, rng);
    dx.assign(N * C, 0.0f);
    router.backward(dgates.data(), dx.data());
  };
  std::vector<float> g32, dx32, g16, dx16, x, w;
  run(Precision::Fp32, g32, dx32, x, w);
  run(Precision::Bf16, g16, dx16, x, w);
  auto round = [](float v) { return double(kernels::to_float(kernels::to_bf16(v))); };
  double worst_rounded = 0, worst_fp32 = 0;
  for (int64_t t = 0; t < N; ++t) {
    std::vector<double> z(E, 0.0);
    for (int64_t e = 0; e < E; ++e)
      for (int64_t c = 0; c < C; ++c) z[size_t(e)] += round(x[size_t(t * C + c)]) * round(w[size_t(c * E + e)]);
    // The top-2 gate of the first choice, p_a / (p_a + p_b), from the rounded logits.
    std::vector<double> sorted = z;
    std::sort(sorted.rbegin(), sorted.rend());
    const double gate = 1.0 / (1.0 + std::exp(sorted[1] - sorted[0]));
    worst_rounded = std::max(worst_rounded, std::abs(gate - g16[size_t(t * k)]));
    worst_fp32 = std::max(worst_fp32, std::abs(double(g32[size_t(t * k)]) - g16[size_t(t * k)]));
  }
  EXPECT_LT(worst_rounded, 1e-6) << "the gates of the rounded products";
  EXPECT_GT(worst_fp32, 1e-6) << "not the fp32 router's";
  double d = 0, n = 0;
  for (size_t i = 0; i < dx32.size(); ++i) {
    d += (dx16[i] - dx32[i]) * (dx16[i] - dx32[i]);
    n += dx32[i] * dx32[i];
  }
  EXPECT_LT(std::sqrt(d / n), 2e-2) << "input gradient within bf16's rounding";
}

// Every token prefers expert 0 (then 1): with capacity factor 1 an expert
// takes ceil(T k / E) = 4 tokens of each sequence of 8, first choices first;
// the rest are dropped and counted, and a token whose both choices are
// dropped passes its residual through unchanged. Dropless carries it all.
TEST(MoeMlp, CapacityDropsAndCountsOverflowDroplessCarriesAll) {
  const int64_t B = 2, T = 8, C = 4, N = B * T;
  for (double cf : {1.0, 0.0}) {
    SCOPED_TRACE("capacity factor " + std::to_string(cf));
    const MoeConfig config = moe(4, 2, cf);
    ParamStore store;
    RouterSums sums(4, C, true);
    MoeMlp layer(store, "mlp", C, config, nullptr, nullptr, &sums);
    store.allocate();
    Rng rng(5);
    randomize(store, rng, 0.3f);
    float* w = store.param(store.find("mlp.router.weight") - store.views().data());
    std::fill(w, w + C * 4, 0.0f);
    w[0 * 4 + 0] = 8.0f, w[0 * 4 + 1] = 4.0f;  // feature 0 sends tokens to expert 0, then 1
    std::vector<float> x(N * C, 0.0f), res = random_vector(N * C, rng);
    for (int64_t t = 0; t < N; ++t) x[size_t(t * C)] = 1.0f;
    const float* y = layer.forward(x.data(), B, T, res.data());
    EXPECT_EQ(config.capacity(T), cf > 0 ? 4 : 0);
    EXPECT_EQ(sums.count(0), double(N));
    EXPECT_EQ(sums.count(1), double(N));
    EXPECT_EQ(sums.tokens(), double(N));
    EXPECT_EQ(sums.dropped(), cf > 0 ? double(N) : 0.0);  // 4 of 8 per expert and sequence
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t row = b * T + t;
        double change = 0;
        for (int64_t c = 0; c < C; ++c) change += std::fabs(y[row * C + c] - res[size_t(row * C + c)]);
        if (cf > 0 && t >= 4)
          EXPECT_EQ(change, 0.0) << "token " << t << " of sequence " << b << " was dropped";
        else
          EXPECT_GT(change, 0.0) << "token " << t << " of sequence " << b << " reached its experts";
      }
    Workspace ws{kernels::cpu_backend().allocator()};
    auto dout = random_vector(N * C, rng);
    std::vector<float> dx(N * C);
    layer.backward(dx.data(), dout.data(), ws);  // experts 2, 3 saw nothing: no crash, zero gradient
    const ParamView& idle = *store.find("mlp.experts.3.c_fc.weight");
    for (size_t i = 0; i < idle.numel; ++i) ASSERT_EQ(store.grads()[idle.offset + i], 0.0f);
  }
}

// The balancing loss's gradient with respect to the router weight (the
// loads c held fixed, as they carry no gradient), from the step's sums over
// two micro-batches, against finite differences of the loss.
TEST(RouterSums, BalancingGradientMatchesFiniteDifferences) {
  const int64_t C = 5, T = 6, E = 4, k = 2;
  const double coef = 0.5;
  ParamStore store;
  Router router(store, "r", C, moe(E, k));
  store.allocate();
  Rng rng(9);
  randomize(store, rng, 0.5f);
  auto x0 = random_vector(T * C, rng), x1 = random_vector(2 * T * C, rng);
  RouterSums sums(E, C, true);
  auto loss = [&] {
    sums.reset();
    router.forward(x0.data(), 1, T, &sums);
    router.forward(x1.data(), 2, T, &sums);
    return sums.balancing_loss(coef, k);
  };
  const double l = loss();
  std::vector<float> dw(C * E);
  sums.balancing_gradient(coef, k, dw.data());
  // The loss by its definition: coef E / (N^2 k) sum_i c_i S_i.
  double expected = 0;
  for (int64_t e = 0; e < E; ++e) expected += sums.count(e) * sums.probability_sum(e);
  EXPECT_NEAR(l, coef * E / (18.0 * 18.0 * k) * expected, 1e-9);
  EXPECT_EQ(sums.tokens(), 18.0);
  expect_grad_matches(store.param(0), dw.data(), dw.size(), loss, "d balancing / d W", rng, 20,
                      {.eps = 2e-3f, .atol = 1e-5, .rtol = 2e-2});
}

// Auxiliary-loss-free balancing: the under-loaded experts' bias rises.
TEST(Router, ExpertBiasMovesTowardsTheMeanLoad) {
  MoeConfig config = moe(4, 1);
  config.expert_bias_rate = 0.25;
  ParamStore store;
  Router router(store, "r", 2, config);
  store.allocate();
  ASSERT_TRUE(router.has_expert_bias());
  EXPECT_FALSE(store.view(router.expert_bias_index()).weight_decay);
  RouterSums sums(4, 2, false);
  sums.counts()[0] = 5, sums.counts()[1] = 1, sums.counts()[2] = 1, sums.counts()[3] = 1;
  router.update_expert_bias(sums);
  const float* bias = store.param(router.expert_bias_index());
  EXPECT_EQ(bias[0], -0.25f);
  EXPECT_EQ(bias[1], 0.25f);
  EXPECT_EQ(bias[3], 0.25f);
}

TEST(MoeMlp, RejectsTopKOutsideTheExperts) {
  ParamStore store;
  EXPECT_THROW(Router(store, "r", 4, moe(4, 5)), ConfigError);
  EXPECT_THROW(Router(store, "q", 4, moe(4, 0)), ConfigError);
}

}  // namespace
}  // namespace meshtrain::nn
