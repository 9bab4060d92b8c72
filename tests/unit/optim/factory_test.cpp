// make_optimizer: the right optimizer per name, errors that name the key.
#include <gtest/gtest.h>

#include <cmath>

#include "meshtrain/core/error.hpp"
#include "meshtrain/optim/factory.hpp"
#include "optim_test_util.hpp"

namespace meshtrain {
namespace {

std::string error_of(const OptimizerConfig& c) {
  ParamStore s;
  testing::make_tiny_store(s);
  try {
    make_optimizer(c, s);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(MakeOptimizer, BuildsEachByName) {
  ParamStore s;
  testing::make_tiny_store(s);
  for (const EnumName<OptimizerKind>& kind : kOptimizerKindNames) {
    OptimizerConfig c;
    c.kind = kind.value;
    auto opt = make_optimizer(c, s);
    EXPECT_EQ(opt->name(), kind.name);
    EXPECT_EQ(opt->steps_taken(), 0);
    for (auto& [buffer_name, buffer] : opt->state_buffers()) EXPECT_EQ(buffer->size(), s.flat_size()) << buffer_name;
  }
}

TEST(OptimizerKind, NamesReadBothWays) {
  EXPECT_EQ(enum_choices<OptimizerKind>(), "sgd, adamw, lars, lamb");
  EXPECT_EQ(parse_enum<OptimizerKind>("lamb"), OptimizerKind::Lamb);
  EXPECT_EQ(parse_enum<OptimizerKind>("adamx"), std::nullopt);
  EXPECT_EQ(enum_name(OptimizerKind::AdamW), "adamw");
}

TEST(MakeOptimizer, OutOfRangeValuesNameTheKey) {
  auto starts_with = [](const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; };
  OptimizerConfig c;
  c.lr = -1;
  EXPECT_TRUE(starts_with(error_of(c), "optimizer.lr:")) << error_of(c);
  c = {};
  c.lr = NAN;
  EXPECT_TRUE(starts_with(error_of(c), "optimizer.lr:")) << error_of(c);
  c = {};
  c.weight_decay = -0.1;
  EXPECT_TRUE(starts_with(error_of(c), "optimizer.weight_decay:")) << error_of(c);
  c = {};
  c.beta1 = 1.0;
  EXPECT_EQ(error_of(c), "optimizer.beta1: must be in [0, 1), got 1");
  c = {};
  c.kind = OptimizerKind::Lamb;
  c.beta2 = -0.5;
  EXPECT_TRUE(starts_with(error_of(c), "optimizer.beta2:")) << error_of(c);
  c = {};
  c.eps = -1e-8;
  EXPECT_TRUE(starts_with(error_of(c), "optimizer.eps:")) << error_of(c);
  c = {};
  c.kind = OptimizerKind::Sgd;
  c.momentum = 1.5;
  EXPECT_TRUE(starts_with(error_of(c), "optimizer.momentum:")) << error_of(c);
  c = {};
  c.kind = OptimizerKind::Sgd;
  c.momentum = 0;
  c.nesterov = true;
  EXPECT_TRUE(starts_with(error_of(c), "optimizer.nesterov:")) << error_of(c);
  c = {};
  c.kind = OptimizerKind::Lars;
  c.trust_coefficient = 0;
  EXPECT_TRUE(starts_with(error_of(c), "optimizer.trust_coefficient:")) << error_of(c);
}

TEST(MakeOptimizer, IgnoresFieldsTheOptimizerDoesNotRead) {
  OptimizerConfig c;
  c.kind = OptimizerKind::Sgd;
  c.beta1 = 5;  // Adam-only
  EXPECT_EQ(error_of(c), "no error");
}

TEST(Optimizer, StepRejectsAStoreOfAnotherLayout) {
  ParamStore a, b;
  testing::make_tiny_store(a);
  b.declare("x", {100}, true);
  b.allocate();
  OptimizerConfig c;
  auto opt = make_optimizer(c, a);
  EXPECT_THROW(opt->step(b, 0.1f), Error);
}

}  // namespace
}  // namespace meshtrain
