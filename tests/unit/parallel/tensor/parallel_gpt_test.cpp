// The whole GPT split over T ranks (threads): blocks by heads and hidden
// units, wte by vocabulary rows with the loss over the logits' vocabulary
// shards, against the serial GPT with the same seed: the loss (the same on
// every rank), the accuracy count and every gradient slice agree, T = 1, 2, 4.
#include <gtest/gtest.h>

#include "meshtrain/core/error.hpp"
#include "meshtrain/nn/gpt.hpp"
#include "tp_test_util.hpp"

namespace meshtrain::parallel {
namespace {

const GptConfig kConfig{2, 16, 4, 8, 64};  // layers, width, heads, block, vocabulary

void fill_batch(Batch& batch) {
  batch.batch_size = 2;
  batch.seq_len = 8;
  batch.tokens.ensure(16);
  batch.targets.ensure(16);
  Rng rng(3);
  for (int i = 0; i < 16; ++i) {
    batch.tokens[i] = static_cast<int32_t>(rng.below(64));
    batch.targets[i] = static_cast<int32_t>(rng.below(64));
  }
}

TEST(ParallelGpt, LossAndGradientsEqualTheSerialModel) {
  Batch batch;
  fill_batch(batch);
  Gpt serial(kConfig);
  Rng rng(11);
  serial.init_parameters(rng);
  const ForwardResult want = serial.forward(batch);
  serial.backward();

  for (int ways : {1, 2, 4}) {
    SCOPED_TRACE("T = " + std::to_string(ways));
    std::vector<ForwardResult> got(static_cast<size_t>(ways));
    std::vector<size_t> bad_grads(static_cast<size_t>(ways));
    std::vector<Shape> wte_shapes(static_cast<size_t>(ways));
    tp_test::run_tensor_ranks(ways, [&](int r, TensorParallelGroup& tp) {
      Gpt gpt(kConfig, &tp);
      Rng init(11);
      gpt.init_parameters(init);
      got[size_t(r)] = gpt.forward(batch);
      gpt.backward();
      for (const ParamView& v : gpt.store().views())
        bad_grads[size_t(r)] += tp_test::grad_slice_mismatches(gpt.store(), v, serial.store());
      wte_shapes[size_t(r)] = gpt.store().find("wte.weight")->shape;
    });
    for (int r = 0; r < ways; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      EXPECT_NEAR(got[size_t(r)].loss, want.loss, 1e-5f * want.loss);
      EXPECT_EQ(got[size_t(r)].loss, got[0].loss) << "every rank of the group has the same loss";
      EXPECT_EQ(got[size_t(r)].correct, want.correct);
      EXPECT_EQ(bad_grads[size_t(r)], 0u);
      EXPECT_EQ(wte_shapes[size_t(r)], (Shape{kConfig.vocab_size / ways, kConfig.n_embd})) << "wte split by rows";
    }
  }
}

TEST(ParallelGpt, AVocabularyThatDoesNotSplitIsAConfigError) {
  GptConfig config = kConfig;
  config.vocab_size = 65;
  const auto errors = tp_test::rank_errors<ConfigError>(2, [&](int, TensorParallelGroup& tp) { Gpt gpt(config, &tp); });
  for (const auto& e : errors)
    EXPECT_NE(e.find("vocab_size 65 is not divisible by the 2 tensor-parallel ways"), std::string::npos) << e;
}

// Generation is one process: a group of one generates as the serial model
// does; a larger group, whose ranks hold V/T logits each, says so.
TEST(ParallelGpt, LastLogitsNeedTheWholeVocabulary) {
  const std::vector<int32_t> prompt = {5, 17, 63, 2};
  Gpt serial(kConfig);
  Rng rng(11);
  serial.init_parameters(rng);
  const auto logits = serial.last_logits(prompt);
  const std::vector<float> want(logits.begin(), logits.end());

  tp_test::run_tensor_ranks(1, [&](int, TensorParallelGroup& tp) {
    Gpt gpt(kConfig, &tp);
    Rng init(11);
    gpt.init_parameters(init);
    const auto got = gpt.last_logits(prompt);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(tp_test::mismatches(got.data(), want.data(), want.size()), 0u);
  });
  const auto errors = tp_test::rank_errors(2, [&](int, TensorParallelGroup& tp) {
    Gpt gpt(kConfig, &tp);
    gpt.last_logits(prompt);
  });
  for (const auto& e : errors) EXPECT_NE(e.find("generation runs in one process"), std::string::npos) << e;
}

}  // namespace
}  // namespace meshtrain::parallel
