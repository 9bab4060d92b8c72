// LARS and LAMB: per-view trust ratios against hand values, and full updates
// against double-precision references of the formulas in lars.hpp / lamb.hpp.
#include <gtest/gtest.h>

#include <cmath>

#include "meshtrain/optim/factory.hpp"
#include "meshtrain/optim/lamb.hpp"
#include "meshtrain/optim/lars.hpp"
#include "optim_test_util.hpp"

namespace meshtrain {
namespace {

using namespace meshtrain::testing;

// "w" = (3, 4) decayed, "b" = (1, 2) not decayed, with chosen gradients.
void make_hand_store(ParamStore& s, float g0, float g1) {
  s.declare("w", {2}, true);
  s.declare("b", {2}, false);
  s.allocate();
  s.param(0)[0] = 3, s.param(0)[1] = 4;
  s.param(1)[0] = 1, s.param(1)[1] = 2;
  s.grad(0)[0] = g0, s.grad(0)[1] = g1;
  s.grad(1)[0] = 0.5f, s.grad(1)[1] = -0.5f;
}

double view_norm(const ParamStore& s, const std::vector<double>& x, size_t view) {
  double sum = 0;
  for (size_t j = 0; j < s.view(view).numel; ++j) sum += x[s.view(view).offset + j] * x[s.view(view).offset + j];
  return std::sqrt(sum);
}

TEST(Lars, TrustRatioMatchesHandValue) {
  // ||w|| = 5, ||g|| = 1: trust = 0.001 * 5 / (1 + 0.01 * 5) = 0.005 / 1.05.
  ParamStore s;
  make_hand_store(s, 0.6f, 0.8f);
  OptimizerConfig c;
  c.kind = OptimizerKind::Lars;
  c.weight_decay = 0.01;
  c.trust_coefficient = 0.001;
  c.momentum = 0;
  auto opt = make_optimizer(c, s);
  opt->step(s, 1.0f);
  const auto& trust = static_cast<Lars&>(*opt).last_trust_ratios();
  EXPECT_NEAR(trust[0], 0.005 / 1.05, 1e-9);
  EXPECT_EQ(trust[1], 1.0);  // excluded view
  // w -= lr * trust * (g + wd * w); b -= lr * g.
  EXPECT_NEAR(s.param(0)[0], 3 - 0.005 / 1.05 * (0.6 + 0.03), 1e-6);
  EXPECT_NEAR(s.param(1)[0], 1 - 0.5, 1e-6);
}

TEST(Lars, ZeroGradientGivesTrustOne) {
  ParamStore s;
  make_hand_store(s, 0, 0);
  OptimizerConfig c;
  c.kind = OptimizerKind::Lars;
  auto opt = make_optimizer(c, s);
  opt->step(s, 0.1f);
  EXPECT_EQ(static_cast<Lars&>(*opt).last_trust_ratios()[0], 1.0);
}

TEST(Lars, MatchesReferenceForThreeSteps) {
  ParamStore s;
  make_tiny_store(s);
  OptimizerConfig c;
  c.kind = OptimizerKind::Lars;
  c.weight_decay = 0.05;
  c.trust_coefficient = 0.02;
  c.momentum = 0.9;
  auto opt = make_optimizer(c, s);
  std::vector<double> w = params_as_double(s), buf(s.flat_size(), 0.0);
  for (int k = 0; k < 3; ++k) {
    set_grads(s, k);
    opt->step(s, 0.5f);
    for (size_t v = 0; v < s.views().size(); ++v) {
      const ParamView& view = s.view(v);
      double trust = 1, wd = 0;
      if (view.weight_decay) {
        std::vector<double> g(s.flat_size(), 0.0);
        for (size_t j = 0; j < view.numel; ++j) g[view.offset + j] = grad_value(view.offset + j, k);
        const double wn = view_norm(s, w, v), gn = view_norm(s, g, v);
        wd = c.weight_decay;
        trust = c.trust_coefficient * wn / (gn + wd * wn);
      }
      for (size_t j = 0; j < view.numel; ++j) {
        const size_t i = view.offset + j;
        const double d = trust * (grad_value(i, k) + wd * w[i]);
        buf[i] = 0.9 * buf[i] + d;
        w[i] -= 0.5 * buf[i];
      }
    }
    expect_params_near(s, w);
  }
}

TEST(Lamb, TrustRatioMatchesHandValue) {
  // Step 1 with eps = 0, wd = 0: u = g / |g| = (1, 1), so trust = 5 / sqrt(2).
  ParamStore s;
  make_hand_store(s, 0.6f, 0.8f);
  OptimizerConfig c;
  c.kind = OptimizerKind::Lamb;
  c.eps = 0;
  auto opt = make_optimizer(c, s);
  opt->step(s, 0.01f);
  const auto& trust = static_cast<Lamb&>(*opt).last_trust_ratios();
  EXPECT_NEAR(trust[0], 5 / std::sqrt(2.0), 1e-5);
  EXPECT_EQ(trust[1], 1.0);
  EXPECT_NEAR(s.param(0)[0], 3 - 0.01 * 5 / std::sqrt(2.0), 1e-6);
  EXPECT_NEAR(s.param(1)[1], 2 + 0.01, 1e-6);  // excluded: plain Adam step of -lr * sign(g)
}

TEST(Lamb, MatchesReferenceForThreeSteps) {
  ParamStore s;
  make_tiny_store(s);
  OptimizerConfig c;
  c.kind = OptimizerKind::Lamb;
  c.weight_decay = 0.01;
  c.beta1 = 0.9;
  c.beta2 = 0.999;
  c.eps = 1e-6;
  auto opt = make_optimizer(c, s);
  std::vector<double> w = params_as_double(s), m(s.flat_size()), v(s.flat_size()), u(s.flat_size());
  for (int k = 0; k < 3; ++k) {
    const int t = k + 1;
    set_grads(s, k);
    opt->step(s, 0.02f);
    const double bc1 = 1 - std::pow(c.beta1, t), bc2 = 1 - std::pow(c.beta2, t);
    for (size_t vi = 0; vi < s.views().size(); ++vi) {
      const ParamView& view = s.view(vi);
      const double wd = view.weight_decay ? c.weight_decay : 0.0;
      for (size_t j = 0; j < view.numel; ++j) {
        const size_t i = view.offset + j;
        const double g = grad_value(i, k);
        m[i] = c.beta1 * m[i] + (1 - c.beta1) * g;
        v[i] = c.beta2 * v[i] + (1 - c.beta2) * g * g;
        u[i] = (m[i] / bc1) / (std::sqrt(v[i]) / std::sqrt(bc2) + c.eps) + wd * w[i];
      }
      const double wn = view_norm(s, w, vi), un = view_norm(s, u, vi);
      const double trust = view.weight_decay && wn > 0 && un > 0 ? wn / un : 1.0;
      EXPECT_NEAR(static_cast<Lamb&>(*opt).last_trust_ratios()[vi], trust, 1e-6 * trust);
      for (size_t j = 0; j < view.numel; ++j) w[view.offset + j] -= double(0.02f) * trust * u[view.offset + j];
    }
    expect_params_near(s, w);
  }
}

}  // namespace
}  // namespace meshtrain
