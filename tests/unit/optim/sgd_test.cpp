// SGD against torch.optim.SGD's formulas evaluated in double.
#include <gtest/gtest.h>

#include "meshtrain/optim/factory.hpp"
#include "optim_test_util.hpp"

namespace meshtrain {
namespace {

using namespace meshtrain::testing;

// torch.optim.SGD, dampening 0, in double.
void reference_sgd_step(const ParamStore& s, std::vector<double>& w, std::vector<double>& buf,
                        int k, double lr, double wd, double momentum, bool nesterov) {
  for (const auto& v : s.views())
    for (size_t j = 0; j < v.numel; ++j) {
      const size_t i = v.offset + j;
      double d = grad_value(i, k) + (v.weight_decay ? wd * w[i] : 0.0);
      if (momentum != 0) {
        buf[i] = k == 0 ? d : momentum * buf[i] + d;
        d = nesterov ? d + momentum * buf[i] : buf[i];
      }
      w[i] -= lr * d;
    }
}

void check_sgd(double momentum, bool nesterov, double wd) {
  ParamStore s;
  make_tiny_store(s);
  OptimizerConfig c;
  c.kind = OptimizerKind::Sgd;
  c.momentum = momentum;
  c.nesterov = nesterov;
  c.weight_decay = wd;
  auto opt = make_optimizer(c, s);
  std::vector<double> w = params_as_double(s), buf(s.flat_size(), 0.0);
  const double lrs[] = {0.1, 0.05, 0.2};
  for (int k = 0; k < 3; ++k) {
    set_grads(s, k);
    opt->step(s, float(lrs[k]));
    reference_sgd_step(s, w, buf, k, double(float(lrs[k])), wd, momentum, nesterov);
    expect_params_near(s, w);
  }
  EXPECT_EQ(opt->steps_taken(), 3);
}

TEST(Sgd, PlainMatchesReference) { check_sgd(0.0, false, 0.0); }
TEST(Sgd, MomentumMatchesReference) { check_sgd(0.9, false, 0.0); }
TEST(Sgd, NesterovMatchesReference) { check_sgd(0.9, true, 0.0); }
TEST(Sgd, WeightDecayMatchesReference) { check_sgd(0.9, false, 0.1); }
TEST(Sgd, NesterovWithWeightDecayMatchesReference) { check_sgd(0.8, true, 0.05); }

TEST(Sgd, NesterovTakesALargerFirstStepThanPlainMomentum) {
  // Step 1: buf = g, plain moves by lr*g, Nesterov by lr*(1 + momentum)*g.
  ParamStore plain_store, nest_store;
  make_tiny_store(plain_store);
  make_tiny_store(nest_store);
  OptimizerConfig c;
  c.kind = OptimizerKind::Sgd;
  c.momentum = 0.9;
  auto plain = make_optimizer(c, plain_store);
  c.nesterov = true;
  auto nest = make_optimizer(c, nest_store);
  const std::vector<double> w0 = params_as_double(plain_store);
  set_grads(plain_store, 0);
  set_grads(nest_store, 0);
  plain->step(plain_store, 0.1f);
  nest->step(nest_store, 0.1f);
  for (const auto& v : plain_store.views())
    for (size_t j = 0; j < v.numel; ++j) {
      const size_t i = v.offset + j;
      const double plain_delta = w0[i] - plain_store.params()[i];
      const double nest_delta = w0[i] - nest_store.params()[i];
      EXPECT_NEAR(nest_delta, 1.9 * plain_delta, 1e-6);
    }
}

TEST(Sgd, WeightDecaySkipsExcludedViews) {
  // With zero gradients, only decayed views move.
  ParamStore s;
  make_tiny_store(s);
  OptimizerConfig c;
  c.kind = OptimizerKind::Sgd;
  c.momentum = 0;
  c.weight_decay = 0.5;
  auto opt = make_optimizer(c, s);
  const std::vector<double> w0 = params_as_double(s);
  opt->step(s, 0.1f);
  for (size_t j = 0; j < 6; ++j) EXPECT_FLOAT_EQ(s.param(0)[j], float(w0[j] * (1 - 0.05)));
  for (size_t j = 0; j < 3; ++j) EXPECT_EQ(s.param(1)[j], float(w0[s.view(1).offset + j]));
}

TEST(Sgd, StateBuffersOnlyWithMomentum) {
  ParamStore s;
  make_tiny_store(s);
  OptimizerConfig c;
  c.kind = OptimizerKind::Sgd;
  c.momentum = 0;
  EXPECT_TRUE(make_optimizer(c, s)->state_buffers().empty());
  c.momentum = 0.9;
  auto opt = make_optimizer(c, s);
  auto bufs = opt->state_buffers();
  ASSERT_EQ(bufs.size(), 1u);
  EXPECT_EQ(bufs[0].first, "momentum_buffer");
  EXPECT_EQ(bufs[0].second->size(), s.flat_size());
}

}  // namespace
}  // namespace meshtrain
