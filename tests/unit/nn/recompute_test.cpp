// Activation recomputation against no recomputation: the same bits for the
// loss and every gradient, and less activation memory.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "meshtrain/core/error.hpp"
#include "meshtrain/core/memory.hpp"
#include "meshtrain/nn/gpt.hpp"
#include "meshtrain/nn/vit.hpp"

namespace meshtrain {
namespace {

struct Pass {
  float loss = 0;
  std::vector<float> grads;
  size_t activation_bytes = 0;  // the model's activations after the pass
};

GptConfig config(nn::Recompute mode, Precision precision = Precision::Fp32) {
  GptConfig c{.n_layer = 3, .n_embd = 32, .n_head = 4, .block_size = 16, .vocab_size = 256};
  c.recompute = mode;
  c.precision = precision;
  return c;
}

void fill(Batch& batch, int64_t B, int64_t T) {
  batch.batch_size = B;
  batch.seq_len = T;
  batch.tokens.ensure(B * T);
  batch.targets.ensure(B * T);
  for (int64_t i = 0; i < B * T; ++i) {
    batch.tokens[i] = static_cast<int32_t>((i * 37 + 11) % 256);
    batch.targets[i] = static_cast<int32_t>((i * 53 + 5) % 256);
  }
}

// Two steps' forward and backward (the second sees the buffers the first left).
Pass run(nn::Recompute mode, bool split_backward = false, Precision precision = Precision::Fp32) {
  const size_t before = MemoryTracker::global().current(MemoryKind::Activations);
  Pass pass;
  {
    Gpt gpt(config(mode, precision), nullptr,
            {{.first_layer = 0, .end_layer = 3, .embedding = true, .head = true}});
    Rng rng(7);
    gpt.init_parameters(rng);
    Batch batch;
    fill(batch, 2, 16);
    for (int step = 0; step < 2; ++step) {
      gpt.store().zero_grads();
      if (split_backward) {
        ForwardResult r;
        gpt.forward_piece(0, 0, batch, &r);
        gpt.backward_piece(0, 0, /*split=*/true);
        gpt.backward_piece_weights(0, 0);
        pass.loss = r.loss;
      } else {
        pass.loss = gpt.forward(batch).loss;
        gpt.backward();
      }
    }
    const auto g = gpt.store().grads();
    pass.grads.assign(g.begin(), g.end());
    pass.activation_bytes = MemoryTracker::global().current(MemoryKind::Activations) - before;
  }
  return pass;
}

TEST(Recompute, SelectiveAndFullAreBitwiseEqualToNoneAndKeepLess) {
  const Pass none = run(nn::Recompute::None);
  for (nn::Recompute mode : {nn::Recompute::Selective, nn::Recompute::Full}) {
    const Pass again = run(mode);
    EXPECT_EQ(std::memcmp(&none.loss, &again.loss, sizeof(float)), 0) << enum_string(mode);
    ASSERT_EQ(none.grads.size(), again.grads.size());
    EXPECT_EQ(std::memcmp(none.grads.data(), again.grads.data(), none.grads.size() * sizeof(float)), 0)
        << enum_string(mode);
    EXPECT_LT(again.activation_bytes, none.activation_bytes) << enum_string(mode);
  }
  // Three blocks' probabilities (B NH T T = 2 4 16 16 floats each) become one.
  const Pass selective = run(nn::Recompute::Selective);
  EXPECT_EQ(none.activation_bytes - selective.activation_bytes, 2 * 2 * 4 * 16 * 16 * sizeof(float));
}

TEST(Recompute, FullReplaysBeforeASplitBackwardsWeightGradients) {
  const Pass none = run(nn::Recompute::None, /*split_backward=*/true);
  const Pass full = run(nn::Recompute::Full, /*split_backward=*/true);
  EXPECT_EQ(std::memcmp(&none.loss, &full.loss, sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(none.grads.data(), full.grads.data(), none.grads.size() * sizeof(float)), 0);
}

TEST(Recompute, BitwiseEqualToNoneInBf16Too) {
  // The replays round the same fp32 values to bf16 again: the same bits.
  for (bool split : {false, true}) {
    const Pass none = run(nn::Recompute::None, split, Precision::Bf16);
    const Pass fp32 = run(nn::Recompute::None, split, Precision::Fp32);
    EXPECT_NE(std::memcmp(none.grads.data(), fp32.grads.data(), none.grads.size() * sizeof(float)), 0)
        << "bf16 products should round differently from fp32's";
    for (nn::Recompute mode : {nn::Recompute::Selective, nn::Recompute::Full}) {
      const Pass again = run(mode, split, Precision::Bf16);
      EXPECT_EQ(std::memcmp(&none.loss, &again.loss, sizeof(float)), 0) << enum_string(mode) << " split " << split;
      EXPECT_EQ(std::memcmp(none.grads.data(), again.grads.data(), none.grads.size() * sizeof(float)), 0)
          << enum_string(mode) << " split " << split;
    }
  }
}

// The activation bytes a GPT of `layers` blocks holds after a forward and backward.
size_t activations_after_a_step(int64_t layers, Precision precision) {
  const size_t before = MemoryTracker::global().current(MemoryKind::Activations);
  GptConfig c = config(nn::Recompute::None, precision);
  c.n_layer = layers;
  Gpt gpt(c);
  Rng rng(7);
  gpt.init_parameters(rng);
  Batch batch;
  fill(batch, 2, 16);
  gpt.forward(batch);
  gpt.backward();
  return MemoryTracker::global().current(MemoryKind::Activations) - before;
}

// bf16 activations: a block keeps bf16 copies, its layernorms' statistics
// and the fp32 residual stream; the fp32 temporaries and the GELU's output
// (made again in backward) live once per model.
// Per block, with N = B T = 32 rows, C = 32, NH T = 64, in bytes a row:
//   fp32  4 (C + 3C + NH T + C + C + C + 4C + 4C + C) = 64 C + 4 NH T
//   bf16  2 (C + 3C + NH T + C + C + 4C) + 4 (C + C) = 28 C + 2 NH T
// plus 4 + 4 for each layernorm's mean and rstd.
TEST(Recompute, Bf16ActivationsKeepHalfTheBytesPerBlock) {
  const int64_t N = 32, C = 32, NHT = 64, stats = 2 * 2 * N * 4;
  const size_t fp32_block = N * (64 * C + 4 * NHT) + stats, bf16_block = N * (28 * C + 2 * NHT) + stats;
  EXPECT_EQ(activations_after_a_step(6, Precision::Fp32) - activations_after_a_step(3, Precision::Fp32),
            3 * fp32_block);
  EXPECT_EQ(activations_after_a_step(6, Precision::Bf16) - activations_after_a_step(3, Precision::Bf16),
            3 * bf16_block);
  // A model made for bf16 activations does not keep what an fp32 backward reads.
  Gpt gpt(config(nn::Recompute::None, Precision::Bf16));
  Rng rng(1);
  gpt.init_parameters(rng);
  Batch batch;
  fill(batch, 2, 16);
  gpt.forward(batch);
  gpt.store().set_compute_precision(Precision::Fp32);
  EXPECT_THROW(gpt.backward(), Error);
}

TEST(Recompute, FullRefusesMixtureOfExpertsBlocks) {
  GptConfig c = config(nn::Recompute::Full);
  c.moe.n_expert = 4;
  c.moe.top_k = 2;
  EXPECT_THROW(Gpt gpt(c), ConfigError);
  c.recompute = nn::Recompute::Selective;
  EXPECT_NO_THROW(Gpt gpt(c));
}

TEST(Recompute, VitBlocksRecomputeToo) {
  auto pass = [](nn::Recompute mode, Precision precision = Precision::Fp32) {
    Vit vit(VitConfig{.image_size = 8, .patch_size = 4, .n_layer = 2, .n_embd = 16, .n_head = 2, .classes = 3,
                      .recompute = mode, .precision = precision});
    Rng rng(3);
    vit.init_parameters(rng);
    Batch batch;
    batch.batch_size = 2;
    batch.image_h = batch.image_w = 8;
    batch.pixels.ensure(2 * 64);
    batch.targets.ensure(2);
    for (int i = 0; i < 128; ++i) batch.pixels[i] = float(i % 13) / 13.0f;
    batch.targets[0] = 1;
    batch.targets[1] = 2;
    vit.store().zero_grads();
    vit.forward(batch);
    vit.backward();
    const auto g = vit.store().grads();
    return std::vector<float>(g.begin(), g.end());
  };
  const auto none = pass(nn::Recompute::None), full = pass(nn::Recompute::Full);
  EXPECT_EQ(std::memcmp(none.data(), full.data(), none.size() * sizeof(float)), 0);
  // In bf16 (non-causal attention, bf16 activations) too; and within bf16's
  // rounding of fp32's gradients (norm-relative), not equal to them.
  const auto none16 = pass(nn::Recompute::None, Precision::Bf16), full16 = pass(nn::Recompute::Full, Precision::Bf16);
  EXPECT_EQ(std::memcmp(none16.data(), full16.data(), none16.size() * sizeof(float)), 0);
  double diff = 0, norm = 0;
  for (size_t i = 0; i < none.size(); ++i) {
    diff += (double(none16[i]) - none[i]) * (double(none16[i]) - none[i]);
    norm += double(none[i]) * none[i];
  }
  EXPECT_GT(diff, 0.0);
  EXPECT_LT(std::sqrt(diff), 2e-2 * std::sqrt(norm));
}

}  // namespace
}  // namespace meshtrain
