// The planner's memory and FLOP formulas against published figures.
#include <gtest/gtest.h>

#include "meshtrain/core/error.hpp"
#include "meshtrain/plan/batch_rule.hpp"
#include "meshtrain/plan/strategies.hpp"
#include "plan_test_support.hpp"

namespace meshtrain::plan {
namespace {

// ZeRO (Rajbhandari et al., 2020), Figure 1: a 7.5B-parameter model on 64
// devices with mixed-precision Adam (K = 12) needs, per device, 120 GB of
// model state without sharding, 31.4 GB with P_os, 16.6 GB with P_os+g and
// 1.9 GB with P_os+g+p.
TEST(ZeroPaper, ModelStatePerDeviceFor7_5BOn64Devices) {
  const PlanInput in = testing::input_from({"model.params=7.5e9", "hardware.device=custom", "hardware.memory_gb=1000",
                                            "hardware.tflops=100", "hardware.devices_per_node=8", "hardware.nodes=8",
                                            "training.global_batch=64", "training.precision=fp16"});
  in.validate();
  EXPECT_EQ(in.optimizer_bytes(), 12);
  auto state_gb = [&](StrategyKind kind) { return evaluate_strategy(in, kind).memory.model_state() / 1e9; };
  EXPECT_NEAR(state_gb(StrategyKind::DataParallelRing), 120.0, 0.05);
  EXPECT_NEAR(state_gb(StrategyKind::Zero1), 31.4, 0.05);
  EXPECT_NEAR(state_gb(StrategyKind::Zero2), 16.6, 0.05);
  EXPECT_NEAR(state_gb(StrategyKind::Zero3), 1.9, 0.05);
}

TEST(ModelShape, Gpt2SmallHas124MParameters) {
  // GPT-2 small: 12 layers, 768 wide, 12 heads, 1024 positions, 50257
  // tokens, output head tied to the embedding: 124.4 M parameters.
  const PlanInput in = testing::input_from({"model.layers=12", "model.hidden=768", "model.heads=12",
                                            "model.seq_len=1024", "model.vocab=50257", "hardware.device=h100"});
  EXPECT_NEAR(in.model.parameters() / 1e6, 124.4, 0.1);
}

TEST(ModelShape, TrainingFlopsAreSixNPlusAttention) {
  // (6 N + 12 L h s) per token; recomputation runs the forward twice: 8 N + 16 L h s.
  const PlanInput in = testing::input_from({"model.layers=12", "model.hidden=768", "model.heads=12",
                                            "model.seq_len=1024", "model.vocab=50257", "hardware.device=h100"});
  const double n = in.model.parameters(), attention = 12.0 * 12 * 768 * 1024;
  EXPECT_DOUBLE_EQ(in.model.train_flops_per_sample(false), (6 * n + attention) * 1024);
  EXPECT_DOUBLE_EQ(in.model.train_flops_per_sample(true), (8 * n + attention * 4 / 3) * 1024);
}

TEST(ModelShape, ActivationsFollowKorthikanti) {
  // Per layer s b h (34 + 5 a s / h) bytes in 16-bit with dropout, no tensor
  // parallelism; with t-way tensor parallelism s b h (10 + 24/t + 5 a s / (h t));
  // full recomputation keeps 2 s b h per layer plus one layer's full set,
  // selective the layers without the a s / h term plus one layer's. On top:
  // one layer's backward gradients s b h (2 + 16/t + 2 a s / (h t)), the
  // ends 4 s b h and the fp32 logits.
  const PlanInput in = testing::input_from({"model.layers=24", "model.hidden=2048", "model.heads=16",
                                            "model.seq_len=2048", "model.vocab=50000", "hardware.device=h100"});
  const double s = 2048, b = 4, h = 2048, a = 16, L = 24, logits = 4 * s * b * 50000;
  const double layer = s * b * h * (34 + 5 * a * s / h);
  const double rest = s * b * h * (2 + 16 + 2 * a * s / h) + 4 * s * b * h + logits;
  EXPECT_DOUBLE_EQ(in.model.activation_bytes(b, 1, false, 2), L * layer + rest);
  const double layer_t4 = s * b * h * (10 + 24.0 / 4 + 5 * a * s / (h * 4));
  const double rest_t4 = s * b * h * (2 + 16.0 / 4 + 2 * a * s / (h * 4)) + 4 * s * b * h + logits / 4;
  EXPECT_DOUBLE_EQ(in.model.activation_bytes(b, 4, false, 2), L * layer_t4 + rest_t4);
  EXPECT_DOUBLE_EQ(in.model.activation_bytes(b, 1, true, 2), L * 2 * s * b * h + layer + rest);
  EXPECT_DOUBLE_EQ(in.model.activation_bytes(b, 1, ActivationRecompute::Selective, 2),
                   L * 34 * s * b * h + 5 * a * s * s * b + rest);
  const double fp32_rest = 2 * (rest - logits) + logits;  // the logits are fp32 already
  EXPECT_DOUBLE_EQ(in.model.activation_bytes(b, 1, false, 4), 2 * L * layer + fp32_rest);
  // meshtrain's own layers (no dropout): s b h (8 + 24/t + 2 a s / (h t)).
  EXPECT_DOUBLE_EQ(in.model.activation_bytes(b, 1, ActivationRecompute::None, 2, /*dropout=*/false),
                   L * s * b * h * (32 + 2 * a * s / h) + rest);
  // Flash attention (model.flash_attention): no a s terms, and a 4-byte
  // log-sum-exp per row and head in each layer.
  const PlanInput flash = testing::input_from({"model.layers=24", "model.hidden=2048", "model.heads=16",
                                               "model.seq_len=2048", "model.vocab=50000", "model.flash_attention=true",
                                               "hardware.device=h100"});
  EXPECT_DOUBLE_EQ(flash.model.activation_bytes(b, 1, ActivationRecompute::None, 2, /*dropout=*/false),
                   L * (s * b * h * 32 + 4 * s * b * a) + s * b * h * (2 + 16) + 4 * s * b * h + logits);
}

TEST(ModelShape, MixtureOfExpertsCountsActiveParameters) {
  const PlanInput in = testing::input_from({"model.layers=4", "model.hidden=512", "model.heads=8", "model.seq_len=512",
                                            "model.vocab=1000", "model.experts=8", "model.top_k=2", "hardware.device=h100"});
  const double mlp = 8.0 * 512 * 512 + 5 * 512;
  EXPECT_DOUBLE_EQ(in.model.expert_parameters(), 4 * 8 * mlp);
  EXPECT_DOUBLE_EQ(in.model.parameters() - in.model.active_parameters(), 4 * 6 * mlp);
}

// Goyal et al. (2017): ResNet-50 at 0.1 per 256 images trains at batch 8192
// with lr 3.2 (k = 32) after a gradual warmup of 5 epochs of ImageNet
// (1,281,167 images: 782 steps of 8192).
TEST(LargeBatchRule, GoyalImageNetInOneHour) {
  const PlanInput in = testing::input_from(
      {"model.params=25.6e6", "hardware.device=a100-80gb", "training.global_batch=8192", "training.base_lr=0.1",
       "training.reference_batch=256", "training.samples_per_epoch=1281167", "training.optimizer=momentum"});
  const LearningRateAdvice a = large_batch_advice(in);
  ASSERT_TRUE(a.available);
  EXPECT_DOUBLE_EQ(a.lr, 3.2);
  EXPECT_DOUBLE_EQ(a.scale, 32);
  EXPECT_EQ(a.warmup_steps, 782);
  EXPECT_FALSE(a.suggest_layerwise);  // 32x is where SGD still holds; beyond, LARS / LAMB
  const PlanInput larger = testing::input_from(
      {"model.params=25.6e6", "hardware.device=a100-80gb", "training.global_batch=32768", "training.base_lr=0.1",
       "training.reference_batch=256"});
  EXPECT_TRUE(large_batch_advice(larger).suggest_layerwise);
  EXPECT_EQ(large_batch_advice(larger).warmup_steps, 0);  // epoch size unknown
}

TEST(PipelineBubble, StretchesComputeByPMinusOneOverMPlusPMinusOne) {
  // 8 devices: pipeline of 2 stages x 4 replicas, micro-batches of 1: with a
  // global batch of 64, m = 16 per replica, bubble (2-1)/(16+2-1) = 1/17.
  const PlanInput in = testing::input_from({"model.layers=4", "model.hidden=256", "model.heads=4", "model.seq_len=128",
                                            "model.vocab=1000", "hardware.device=a100-80gb",
                                            "training.global_batch=64"});
  const StrategyEstimate pp = evaluate_strategy(in, StrategyKind::PipelineData);
  const StrategyEstimate dp = evaluate_strategy(in, StrategyKind::DataParallelRing);
  ASSERT_EQ(pp.layout.pp, 2);
  ASSERT_EQ(pp.accumulation, 16);
  EXPECT_NEAR(pp.compute_s / dp.compute_s, 17.0 / 16.0, 1e-9);
}

}  // namespace
}  // namespace meshtrain::plan
