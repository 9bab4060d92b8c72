#include "meshtrain/nn/gpt.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "grad_check.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain {
namespace {

using namespace nn::testing;

// targets[b, t] = tokens[b, t + 1] of one long stream, as a byte LM sees it.
void fill_batch(Batch& batch, const std::vector<int32_t>& stream, int64_t B, int64_t T) {
  batch.batch_size = B;
  batch.seq_len = T;
  batch.tokens.ensure(B * T);
  batch.targets.ensure(B * T);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      batch.tokens[b * T + t] = stream[(b * T + t) % stream.size()];
      batch.targets[b * T + t] = stream[(b * T + t + 1) % stream.size()];
    }
}

std::vector<int32_t> random_stream(size_t n, Rng& rng, int64_t V) {
  std::vector<int32_t> s(n);
  for (auto& x : s) x = static_cast<int32_t>(rng.below(V));
  return s;
}

TEST(Gpt, ParametersHaveHuggingFaceNamesAndShapes) {
  const GptConfig cfg{2, 16, 2, 8, 256};
  Gpt gpt(cfg);
  const int64_t C = 16;
  const std::vector<std::pair<std::string, Shape>> want = {
      {"wte.weight", {256, C}},          {"wpe.weight", {8, C}},
      {"h.1.ln_1.weight", {C}},          {"h.1.ln_1.bias", {C}},
      {"h.1.attn.c_attn.weight", {C, 3 * C}}, {"h.1.attn.c_attn.bias", {3 * C}},
      {"h.1.attn.c_proj.weight", {C, C}}, {"h.1.attn.c_proj.bias", {C}},
      {"h.1.ln_2.weight", {C}},          {"h.1.ln_2.bias", {C}},
      {"h.1.mlp.c_fc.weight", {C, 4 * C}}, {"h.1.mlp.c_fc.bias", {4 * C}},
      {"h.1.mlp.c_proj.weight", {4 * C, C}}, {"h.1.mlp.c_proj.bias", {C}},
      {"ln_f.weight", {C}},              {"ln_f.bias", {C}}};
  for (const auto& [name, shape] : want) {
    const ParamView* v = gpt.store().find(name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_EQ(v->shape, shape) << name;
  }
  EXPECT_EQ(gpt.store().views().size(), 2u + 12u * 2 + 2u);
  EXPECT_EQ(gpt.store().parameter_count(), static_cast<size_t>(256 * C + 8 * C + 2 * (12 * C * C + 13 * C) + 2 * C));
  EXPECT_TRUE(gpt.store().find("wte.weight")->weight_decay);
  EXPECT_TRUE(gpt.store().find("h.0.attn.c_proj.weight")->weight_decay);
  EXPECT_FALSE(gpt.store().find("h.0.attn.c_proj.bias")->weight_decay);
  EXPECT_FALSE(gpt.store().find("ln_f.weight")->weight_decay);
  EXPECT_EQ(gpt.kind(), "gpt");
  EXPECT_DOUBLE_EQ(gpt.flops_per_sample(), 6.0 * (2 * 12 * C * C + 256 * C) + 12.0 * 2 * C * 8);
}

TEST(Gpt, InitFollowsGpt2) {
  const GptConfig cfg{4, 64, 4, 16, 256};
  Gpt gpt(cfg);
  Rng rng(1);
  gpt.init_parameters(rng);
  auto stddev = [&](const char* name) {
    const ParamView* v = gpt.store().find(name);
    const float* p = gpt.store().params().data() + v->offset;
    double s = 0;
    for (size_t i = 0; i < v->numel; ++i) s += double(p[i]) * p[i];
    return std::sqrt(s / v->numel);
  };
  EXPECT_NEAR(stddev("h.0.mlp.c_fc.weight"), 0.02, 0.001);
  EXPECT_NEAR(stddev("h.2.attn.c_proj.weight"), 0.02 / std::sqrt(8.0), 0.001);
  EXPECT_NEAR(stddev("h.2.mlp.c_proj.weight"), 0.02 / std::sqrt(8.0), 0.001);
  EXPECT_EQ(stddev("h.1.attn.c_attn.bias"), 0.0);
  EXPECT_EQ(stddev("ln_f.weight"), 1.0);
  EXPECT_EQ(stddev("ln_f.bias"), 0.0);
}

TEST(Gpt, FreshModelLossIsLogVocab) {
  Gpt gpt({2, 32, 4, 16, 256});
  Rng rng(2);
  gpt.init_parameters(rng);
  Batch batch;
  fill_batch(batch, random_stream(4 * 16 + 1, rng, 256), 4, 16);
  const ForwardResult r = gpt.forward(batch);
  EXPECT_NEAR(r.loss, std::log(256.0), 0.05);
  EXPECT_EQ(r.count, 64);
}

TEST(Gpt, GradientMatchesFiniteDifferences) {
  Gpt gpt({2, 16, 2, 8, 32});
  Rng rng(3);
  randomize(gpt.store(), rng, 0.3f);
  Batch batch;
  fill_batch(batch, random_stream(2 * 6 + 1, rng, 32), 2, 6);  // T = 6 < block_size
  gpt.store().zero_grads();
  gpt.forward(batch);
  gpt.backward();
  auto loss = [&] { return static_cast<double>(gpt.forward(batch).loss); };
  expect_param_grads_match(gpt.store(), loss, rng, 3, {1e-2f, 2e-4, 3e-2});
}

TEST(Gpt, LastLogitsAgreeWithForward) {
  const int64_t T = 7;
  Gpt gpt({2, 16, 2, 8, 64});
  Rng rng(4);
  randomize(gpt.store(), rng, 0.3f);
  auto stream = random_stream(T + 1, rng, 64);
  Batch batch;
  fill_batch(batch, stream, 1, T);
  const double want = gpt.forward(batch).loss;
  // Causality: position t's logits depend on tokens [0, t] only, so the loss of
  // the full sequence is the mean over prefixes of the last position's loss.
  double sum = 0;
  for (int64_t t = 1; t <= T; ++t) {
    auto z = gpt.last_logits({stream.data(), static_cast<size_t>(t)});
    ASSERT_EQ(z.size(), 64u);
    double mx = z[0], s = 0;
    for (float v : z) mx = std::max(mx, double(v));
    for (float v : z) s += std::exp(v - mx);
    sum += mx + std::log(s) - z[stream[t]];
  }
  EXPECT_NEAR(sum / T, want, 1e-4);
  EXPECT_THROW(gpt.last_logits({stream.data(), 0}), Error);
  std::vector<int32_t> long_seq(9, 1);
  EXPECT_THROW(gpt.last_logits(long_seq), Error);
}

TEST(Gpt, SgdOnRepeatedSequenceLowersLoss) {
  Gpt gpt({2, 32, 4, 16, 256});
  Rng rng(5);
  gpt.init_parameters(rng);
  const std::vector<int32_t> stream = {'h', 'e', 'l', 'l', 'o', ' '};
  Batch batch;
  fill_batch(batch, stream, 4, 16);
  float first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    gpt.store().zero_grads();
    last = gpt.forward(batch).loss;
    if (step == 0) first = last;
    gpt.backward();
    auto p = gpt.store().params();
    auto g = gpt.store().grads();
    for (size_t i = 0; i < p.size(); ++i) p[i] -= 0.5f * g[i];  // plain SGD
  }
  EXPECT_NEAR(first, std::log(256.0), 0.2);  // tied embeddings favour repeats a little
  EXPECT_LT(last, 0.6f * first) << "first " << first << " last " << last;
}

TEST(Gpt, RejectsBadConfigsAndBatches) {
  EXPECT_THROW(Gpt({2, 30, 4, 16, 256}), ConfigError);
  EXPECT_THROW(Gpt({0, 32, 4, 16, 256}), ConfigError);
  Gpt gpt({1, 16, 2, 8, 16});
  Rng rng(6);
  gpt.init_parameters(rng);
  Batch batch;
  fill_batch(batch, {1, 2, 3}, 2, 9);
  EXPECT_THROW(gpt.forward(batch), Error);  // T > block_size
  fill_batch(batch, {1, 2, 16}, 2, 8);
  EXPECT_THROW(gpt.forward(batch), Error);  // token 16 outside the vocabulary
  EXPECT_THROW(gpt.backward(), Error);
}

TEST(Gpt, StepsAfterTheFirstAllocateNothing) {
  Gpt gpt({2, 32, 4, 16, 256});
  Rng rng(8);
  gpt.init_parameters(rng);
  Batch batch;
  fill_batch(batch, random_stream(65, rng, 256), 4, 16);
  gpt.forward(batch);
  gpt.backward();
  const size_t after_first = MemoryTracker::global().current(MemoryKind::Activations);
  for (int i = 0; i < 2; ++i) {
    gpt.forward(batch);
    gpt.backward();
    gpt.last_logits({batch.tokens.data(), 5});  // generation reuses the training buffers
  }
  EXPECT_EQ(MemoryTracker::global().current(MemoryKind::Activations), after_first);
}

// What pipeline stages and tensor-parallel shards rely on: a tensor's initial
// values depend only on the seed, its name and the model's config, not on
// which other tensors the model holds or how large they are. A 2-layer model
// with 256 tokens and a 5-layer one with 300 share their first two blocks'
// draws (the residual projections scaled by GPT-2's 0.02 / sqrt(2 * n_layer))
// and the embedding's first 256 rows (drawn in global element order), though
// the larger embedding is drawn first.
TEST(Gpt, InitDependsOnlyOnSeedAndTensorName) {
  Gpt shallow(GptConfig{2, 16, 2, 8, 256});
  Gpt deep(GptConfig{5, 16, 2, 8, 300});
  Rng a(7), b(7);
  shallow.init_parameters(a);
  deep.init_parameters(b);
  const double scale = std::sqrt(2.0 * 5) / std::sqrt(2.0 * 2);  // shallow stddev / deep stddev
  for (const auto& v : shallow.store().views()) {
    const ParamView* w = deep.store().find(v.name);
    ASSERT_NE(w, nullptr) << v.name;
    ASSERT_LE(v.numel, w->numel) << v.name;
    const float* x = shallow.store().params().data() + v.offset;
    const float* y = deep.store().params().data() + w->offset;
    const bool residual_projection = v.name.ends_with("c_proj.weight");
    size_t differ = 0;
    for (size_t i = 0; i < v.numel; ++i) {
      if (residual_projection)
        differ += std::abs(x[i] - y[i] * scale) > 1e-6 * std::abs(x[i]) + 1e-12;
      else
        differ += x[i] != y[i];
    }
    EXPECT_EQ(differ, 0u) << v.name << " differs between a 2-layer and a 5-layer model";
  }
  // Different tensors draw from different streams.
  const auto& store = deep.store();
  const float* h0 = store.params().data() + store.find("h.0.mlp.c_fc.weight")->offset;
  const float* h1 = store.params().data() + store.find("h.1.mlp.c_fc.weight")->offset;
  EXPECT_NE(0, std::memcmp(h0, h1, 16 * sizeof(float)));
}

TEST(Gpt, SameSeedSameModel) {
  Gpt a({1, 16, 2, 8, 32}), b({1, 16, 2, 8, 32});
  Rng ra(7), rb(7);
  a.init_parameters(ra);
  b.init_parameters(rb);
  auto pa = a.store().params(), pb = b.store().params();
  EXPECT_TRUE(std::equal(pa.begin(), pa.end(), pb.begin()));
}

}  // namespace
}  // namespace meshtrain
