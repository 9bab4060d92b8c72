#include <gtest/gtest.h>

#include <cmath>

#include "grad_check.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/nn/mlp_classifier.hpp"
#include "meshtrain/nn/vit.hpp"

namespace meshtrain {
namespace {

using namespace nn::testing;

// B random images of `pixels` values each (channels * side * side), labels in [0, classes).
void fill_images(Batch& batch, int64_t B, int64_t side, int64_t pixels, int64_t classes, Rng& rng) {
  batch.batch_size = B;
  batch.image_h = batch.image_w = side;
  batch.pixels.ensure(B * pixels);
  batch.targets.ensure(B);
  for (size_t i = 0; i < batch.pixels.size(); ++i) batch.pixels[i] = rng.uniform();
  for (int64_t b = 0; b < B; ++b) batch.targets[b] = static_cast<int32_t>(rng.below(classes));
}

TEST(MlpClassifier, NamesShapesAndFlops) {
  MlpClassifier mlp({784, {64, 32}, 10});
  EXPECT_EQ(mlp.kind(), "mlp");
  EXPECT_EQ(mlp.store().find("fc.0.weight")->shape, (Shape{784, 64}));
  EXPECT_EQ(mlp.store().find("fc.1.bias")->shape, (Shape{32}));
  EXPECT_EQ(mlp.store().find("head.weight")->shape, (Shape{32, 10}));
  EXPECT_FALSE(mlp.store().find("head.bias")->weight_decay);
  EXPECT_EQ(mlp.store().parameter_count(), 784u * 64 + 64 + 64 * 32 + 32 + 32 * 10 + 10);
  EXPECT_DOUBLE_EQ(mlp.flops_per_sample(), 6.0 * (784 * 64 + 64 * 32 + 32 * 10));
  EXPECT_THROW(MlpClassifier({784, {0}, 10}), ConfigError);
}

TEST(MlpClassifier, GradientMatchesFiniteDifferences) {
  MlpClassifier mlp({12, {9, 7}, 5});
  Rng rng(1);
  randomize(mlp.store(), rng, 0.5f);
  Batch batch;
  fill_images(batch, 6, 0, 12, 5, rng);
  mlp.forward(batch);
  mlp.backward();
  auto loss = [&] { return static_cast<double>(mlp.forward(batch).loss); };
  expect_param_grads_match(mlp.store(), loss, rng, 8, {1e-2f, 2e-4, 3e-2});
}

TEST(MlpClassifier, FreshLossNearLogClassesAndSgdLearns) {
  MlpClassifier mlp({784, {64}, 10});
  Rng rng(2);
  mlp.init_parameters(rng);
  Batch batch;
  fill_images(batch, 32, 28, 784, 10, rng);
  const float first = mlp.forward(batch).loss;
  EXPECT_NEAR(first, std::log(10.0), 0.5);
  float last = first;
  for (int step = 0; step < 30; ++step) {
    mlp.store().zero_grads();
    last = mlp.forward(batch).loss;
    mlp.backward();
    auto p = mlp.store().params();
    auto g = mlp.store().grads();
    for (size_t i = 0; i < p.size(); ++i) p[i] -= 0.1f * g[i];
  }
  EXPECT_LT(last, 0.5f * first);  // memorizes 32 random images
}

TEST(Vit, NamesShapesAndFlops) {
  const VitConfig cfg{28, 7, 1, 2, 32, 4, 10};
  Vit vit(cfg);
  EXPECT_EQ(vit.kind(), "vit");
  EXPECT_EQ(vit.num_patches(), 16);
  EXPECT_EQ(vit.store().find("patch_embed.weight")->shape, (Shape{49, 32}));
  EXPECT_EQ(vit.store().find("pos_embed")->shape, (Shape{16, 32}));
  EXPECT_FALSE(vit.store().find("pos_embed")->weight_decay);
  EXPECT_EQ(vit.store().find("h.1.attn.c_attn.weight")->shape, (Shape{32, 96}));
  EXPECT_EQ(vit.store().find("head.weight")->shape, (Shape{32, 10}));
  EXPECT_DOUBLE_EQ(vit.flops_per_sample(),
                   16 * (6.0 * (49 * 32 + 12.0 * 2 * 32 * 32) + 12.0 * 2 * 32 * 16) + 6.0 * 32 * 10);
  EXPECT_THROW(Vit({28, 5, 1, 2, 32, 4, 10}), ConfigError);  // 5 does not divide 28
}

TEST(Vit, GradientMatchesFiniteDifferences) {
  Vit vit({8, 4, 2, 2, 8, 2, 3});  // 2 channels: exercises the planar patch layout
  Rng rng(3);
  randomize(vit.store(), rng, 0.3f);
  Batch batch;
  fill_images(batch, 3, 8, 2 * 64, 3, rng);
  vit.forward(batch);
  vit.backward();
  auto loss = [&] { return static_cast<double>(vit.forward(batch).loss); };
  expect_param_grads_match(vit.store(), loss, rng, 4, {1e-2f, 2e-4, 3e-2});
}

TEST(Vit, FreshLossNearLogClassesAndRejectsWrongImages) {
  Vit vit({28, 7, 1, 2, 32, 4, 10});
  Rng rng(4);
  vit.init_parameters(rng);
  Batch batch;
  fill_images(batch, 8, 28, 784, 10, rng);
  const ForwardResult r = vit.forward(batch);
  EXPECT_NEAR(r.loss, std::log(10.0), 0.05);
  EXPECT_EQ(r.count, 8);
  vit.backward();
  EXPECT_THROW(vit.backward(), Error);
  batch.image_h = 32;
  EXPECT_THROW(vit.forward(batch), Error);
}

}  // namespace
}  // namespace meshtrain
