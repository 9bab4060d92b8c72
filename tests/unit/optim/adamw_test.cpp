// AdamW against torch.optim.AdamW's formulas evaluated in double.
#include <gtest/gtest.h>

#include <cmath>

#include "meshtrain/optim/factory.hpp"
#include "optim_test_util.hpp"

namespace meshtrain {
namespace {

using namespace meshtrain::testing;

struct AdamState {
  std::vector<double> w, m, v;
};

// torch.optim.AdamW (amsgrad off) step t (1-based), in double.
void reference_adamw_step(const ParamStore& s, AdamState& st, int t, double lr, double wd,
                          double b1, double b2, double eps) {
  const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
  for (const auto& view : s.views())
    for (size_t j = 0; j < view.numel; ++j) {
      const size_t i = view.offset + j;
      const double g = grad_value(i, t - 1);
      if (view.weight_decay) st.w[i] *= 1 - lr * wd;
      st.m[i] = b1 * st.m[i] + (1 - b1) * g;
      st.v[i] = b2 * st.v[i] + (1 - b2) * g * g;
      const double denom = std::sqrt(st.v[i]) / std::sqrt(bc2) + eps;
      st.w[i] -= lr / bc1 * st.m[i] / denom;
    }
}

TEST(AdamW, MatchesReferenceForThreeSteps) {
  ParamStore s;
  make_tiny_store(s);
  OptimizerConfig c;
  c.kind = OptimizerKind::AdamW;
  c.weight_decay = 0.1;
  c.beta1 = 0.9;
  c.beta2 = 0.95;
  c.eps = 1e-8;
  auto opt = make_optimizer(c, s);
  AdamState st{params_as_double(s), std::vector<double>(s.flat_size()), std::vector<double>(s.flat_size())};
  const float lrs[] = {1e-2f, 3e-3f, 5e-3f};
  for (int k = 0; k < 3; ++k) {
    set_grads(s, k);
    opt->step(s, lrs[k]);
    reference_adamw_step(s, st, k + 1, lrs[k], c.weight_decay, c.beta1, c.beta2, c.eps);
    expect_params_near(s, st.w);
  }
  // The moments too, since checkpoints save them.
  auto bufs = opt->state_buffers();
  ASSERT_EQ(bufs.size(), 2u);
  EXPECT_EQ(bufs[0].first, "exp_avg");
  EXPECT_EQ(bufs[1].first, "exp_avg_sq");
  const std::vector<float> m = bufs[0].second->to_host(), v = bufs[1].second->to_host();
  for (const auto& view : s.views())
    for (size_t j = 0; j < view.numel; ++j) {
      const size_t i = view.offset + j;
      EXPECT_NEAR(m[i], st.m[i], 1e-6 * std::fabs(st.m[i]) + 1e-8);
      EXPECT_NEAR(v[i], st.v[i], 1e-6 * std::fabs(st.v[i]) + 1e-9);
    }
  EXPECT_EQ(opt->steps_taken(), 3);
}

TEST(AdamW, BiasCorrectionResumesFromStepsTaken) {
  // A restored optimizer continues at t = steps_taken() + 1: after one step
  // from zero moments at t = 11, the step size is lr * sqrt(bc2) / bc1 * sign(g).
  ParamStore s;
  make_tiny_store(s);
  OptimizerConfig c;
  c.kind = OptimizerKind::AdamW;
  c.eps = 1e-30;  // negligible next to |g|, but keeps 0/0 away where g = 0
  auto opt = make_optimizer(c, s);
  opt->set_steps_taken(10);
  const std::vector<double> w0 = params_as_double(s);
  set_grads(s, 0);
  opt->step(s, 1e-3f);
  const double bc1 = 1 - std::pow(0.9, 11), bc2 = 1 - std::pow(0.999, 11);
  // m = 0.1 g, sqrt(v) = sqrt(0.001) |g|
  const double expected = 1e-3 / bc1 * 0.1 / (std::sqrt(0.001) / std::sqrt(bc2));
  for (size_t j = 0; j < 6; ++j) {
    const double g = grad_value(j, 0);
    if (g == 0) {
      EXPECT_EQ(s.param(0)[j], float(w0[j]));
      continue;
    }
    // Absolute tolerance: the delta is read off O(1) floats.
    EXPECT_NEAR(w0[j] - s.param(0)[j], std::copysign(expected, g), 5e-7);
  }
  EXPECT_EQ(opt->steps_taken(), 11);
}

TEST(AdamW, DecoupledDecaySkipsExcludedViews) {
  ParamStore s;
  make_tiny_store(s);
  OptimizerConfig c;
  c.kind = OptimizerKind::AdamW;
  c.weight_decay = 0.5;
  auto opt = make_optimizer(c, s);
  const std::vector<double> w0 = params_as_double(s);
  opt->step(s, 0.1f);  // zero gradients: only the decay acts
  for (size_t j = 0; j < 6; ++j) EXPECT_FLOAT_EQ(s.param(0)[j], float(w0[j] * (1 - 0.05)));
  for (size_t j = 0; j < 3; ++j) EXPECT_EQ(s.param(1)[j], float(w0[s.view(1).offset + j]));
}

}  // namespace
}  // namespace meshtrain
